package policy

import (
	"errors"
	"fmt"
	"strconv"
)

// The labels the policy reads.
const (
	// LabelLevel pins a workload at a level: "1", "2", "3" or "4".
	LabelLevel = "ddiskqos.level"
	// LabelExempt, when true, takes a workload out of the policy.
	LabelExempt = "ddiskqos.exempt"
)

// LabelError is a ddiskqos.* label that was not applied.
type LabelError struct {
	Key   string
	Value string
	Msg   string
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("label %s=%q not applied: %s", e.Key, e.Value, e.Msg)
}

// want is what a workload's labels ask for.
type want struct {
	exempt bool
	pin    Level // LevelNone: not pinned
}

// labelCache remembers the raw label values a workload was last seen with,
// so that they are parsed (and a LabelError built) only when they change.
type labelCache struct {
	seen                bool
	hasLevel, hasExempt bool
	level, exempt       string
	want                want
	err                 error
}

// lookup returns what labels ask for, and the error of the labels not
// applied; changed is true when the labels differ from the last call.
func (c *labelCache) lookup(labels map[string]string) (w want, err error, changed bool) {
	lv, hasL := labels[LabelLevel]
	ex, hasE := labels[LabelExempt]
	if c.seen && hasL == c.hasLevel && hasE == c.hasExempt && lv == c.level && ex == c.exempt {
		return c.want, c.err, false
	}
	c.seen, c.hasLevel, c.hasExempt, c.level, c.exempt = true, hasL, hasE, lv, ex
	c.want, c.err = parseLabels(lv, hasL, ex, hasE)
	return c.want, c.err, true
}

func parseLabels(lv string, hasL bool, ex string, hasE bool) (want, error) {
	var w want
	var errs []error
	if hasE {
		b, err := strconv.ParseBool(ex)
		if err != nil {
			errs = append(errs, &LabelError{Key: LabelExempt, Value: ex,
				Msg: `want "true" or "false"`})
		} else {
			w.exempt = b
		}
	}
	if hasL {
		switch l, ok := parseLevel(lv); {
		case !ok:
			errs = append(errs, &LabelError{Key: LabelLevel, Value: lv,
				Msg: `want "1", "2", "3" or "4"`})
		case w.exempt:
			errs = append(errs, &LabelError{Key: LabelLevel, Value: lv,
				Msg: LabelExempt + " is true and takes precedence"})
		default:
			w.pin = l
		}
	}
	if len(errs) == 1 {
		return w, errs[0]
	}
	return w, errors.Join(errs...)
}

// parseLevel accepts exactly "1".."4".
func parseLevel(s string) (Level, bool) {
	if len(s) != 1 || s[0] < '1' || s[0] > '4' {
		return LevelNone, false
	}
	return Level(s[0] - '0'), true
}
