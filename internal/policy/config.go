package policy

import (
	"errors"
	"fmt"
	"time"
)

// MiB is 2^20 bytes.
const MiB = 1 << 20

// The blkio-weight scale of Docker (docker run --blkio-weight, cgroup v1
// blkio.weight); the actuator maps it onto the mechanism it uses.
const (
	MinWeight = 10
	MaxWeight = 1000
)

// DefaultBoostAfter is how long a workload sits at level 4 before it is
// boosted back to level 1. The paper only says "after some time"; 30 s is
// chosen because:
//
//   - After a boost a bulk stream goes through the 2+8+32 = 42 MiB of levels
//     1-3 again before it is back at the floor: about 0.3 s on a disk doing
//     150 MiB/s (all four allowances, 170 MiB, take about 1.1 s). With 30 s
//     a stream at disk speed spends about 1% of its time above level 4, so
//     the boost costs the interactive workloads little.
//   - A workload that is really starved at level 4, say at 2 MiB/s, needs
//     about 20 s for those 42 MiB, so it spends most of each cycle above the
//     floor: the rescue the boost is for.
//   - It bounds how long a workload that did one big burst (an import, a
//     restore) and is interactive again stays penalised: at most 30 s.
//   - A full cycle (boost and three drops) happens at most once per 30 s
//     per workload: slower than a metrics scrape (15 s is common), so the
//     level seen on a dashboard follows it instead of flickering, and the
//     log gets at most four lines per workload per 30 s.
const DefaultBoostAfter = 30 * time.Second

// Mode is how a workload's usage is counted against the allowances.
type Mode uint8

const (
	// ModePaper is the paper's rule: the bytes done at a level count
	// against its allowance until the workload drops; level 4 is left by
	// the boost alone. The zero Mode.
	ModePaper Mode = iota
	// ModeRecent counts recent usage: bytes decay with the time constant
	// Window, so a workload's level follows its rate of I/O now, not all
	// its history (see the package doc).
	ModeRecent
)

// DefaultWindow is ModeRecent's time constant: a workload doing r bytes/s
// steadily counts r × 10 s, so with the default allowances a reader below
// ~210 KB/s stays at level 1, one below ~1 MB/s at level 2 or better, one
// below ~4.4 MB/s at level 3 or better, and anything faster is level 4.
const DefaultWindow = 10 * time.Second

var modeNames = [...]string{ModePaper: "paper", ModeRecent: "recent"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("invalid(%d)", uint8(m))
}

// ParseMode parses "paper" or "recent".
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if s == n {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("policy %q: want recent or paper", s)
}

// Config is the policy's tuning. Index i of the arrays is level i+1.
type Config struct {
	// Mode is the rule: ModePaper (the zero value) or ModeRecent.
	Mode Mode
	// Window is ModeRecent's time constant (> 0 there; unused by
	// ModePaper).
	Window time.Duration
	// Allowances are the bytes (read+written, all devices) a workload may
	// do at each level before it drops to the next; the level-4 allowance
	// never drops it (level 4 is the floor) and is the scale against which
	// level-4 bytes are reported. Each must be > 0.
	Allowances [NumLevels]uint64
	// Weights are the blkio weights (10..1000) of the levels; a lower level
	// must not weigh more than a higher one.
	Weights [NumLevels]uint16
	// BoostAfter is how long a workload sits at level 4 before it goes back
	// to level 1 (ModePaper; ModeRecent has no boost). Must be > 0; see
	// DefaultBoostAfter.
	BoostAfter time.Duration
}

// DefaultConfig returns the paper's rule (ModePaper) with its Table 1
// allowances (in MiB), the weights 1000, 500, 250, 100, DefaultBoostAfter
// and DefaultWindow (used once the Mode is set to ModeRecent, the daemon's
// default).
func DefaultConfig() Config {
	return Config{
		Allowances: [NumLevels]uint64{2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB},
		Weights:    [NumLevels]uint16{1000, 500, 250, 100},
		BoostAfter: DefaultBoostAfter,
		Window:     DefaultWindow,
	}
}

// FieldError is one invalid field of a Config.
type FieldError struct {
	Field string // Go name with index, e.g. "Weights[3]" (index 3 is level 4)
	Value any    // the bad value
	Msg   string // what is wrong with it
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("policy config %s=%v: %s", e.Field, e.Value, e.Msg)
}

// Validate returns nil for a usable Config, otherwise the errors.Join of a
// *FieldError for every problem.
//
// Weights must not increase from level to level: a workload that used more
// would otherwise gain priority, which inverts the policy. Equal weights are
// allowed (a level that only counts). Allowances may be in any order; the
// paper's grow, but nothing breaks when they do not.
func (c Config) Validate() error {
	var errs []error
	for i, a := range c.Allowances {
		if a == 0 {
			errs = append(errs, &FieldError{
				Field: fmt.Sprintf("Allowances[%d]", i), Value: a,
				Msg: fmt.Sprintf("level %d allowance must be > 0 bytes", i+1),
			})
		}
	}
	for i, w := range c.Weights {
		if w < MinWeight || w > MaxWeight {
			errs = append(errs, &FieldError{
				Field: fmt.Sprintf("Weights[%d]", i), Value: w,
				Msg: fmt.Sprintf("level %d weight must be in %d..%d", i+1, MinWeight, MaxWeight),
			})
			continue
		}
		// Compare with the level above only when that one is in range,
		// so one bad weight gives one error.
		if prev := c.Weights[max(i-1, 0)]; i > 0 && prev >= MinWeight && prev <= MaxWeight && w > prev {
			errs = append(errs, &FieldError{
				Field: fmt.Sprintf("Weights[%d]", i), Value: w,
				Msg: fmt.Sprintf("level %d weight is greater than level %d weight %d; weights must not increase as levels drop",
					i+1, i, prev),
			})
		}
	}
	switch c.Mode {
	case ModePaper:
	case ModeRecent:
		if c.Window <= 0 {
			errs = append(errs, &FieldError{Field: "Window", Value: c.Window, Msg: "must be > 0 with the recent policy"})
		}
	default:
		errs = append(errs, &FieldError{Field: "Mode", Value: c.Mode, Msg: "want recent or paper"})
	}
	if c.BoostAfter <= 0 {
		errs = append(errs, &FieldError{
			Field: "BoostAfter", Value: c.BoostAfter,
			Msg: "must be > 0",
		})
	}
	return errors.Join(errs...)
}

// Allowance returns the allowance of level l, 0 for LevelNone or an invalid
// level.
func (c Config) Allowance(l Level) uint64 {
	if !l.Valid() {
		return 0
	}
	return c.Allowances[l-1]
}

// Weight returns the weight of level l, 0 for LevelNone or an invalid level
// (an exempt workload has no weight of ours).
func (c Config) Weight(l Level) uint16 {
	if !l.Valid() {
		return 0
	}
	return c.Weights[l-1]
}

// threshold returns the usage at which a ModeRecent workload leaves level
// l for l+1: the allowances of levels 1..l summed (0 for l = 0).
func (c Config) threshold(l Level) float64 {
	var t float64
	for i := Level1; i <= l && i <= Level4; i++ {
		t += float64(c.Allowances[i-1])
	}
	return t
}
