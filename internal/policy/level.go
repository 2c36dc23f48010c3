package policy

import (
	"fmt"
	"time"
)

// Level is a priority level: 1 is the highest priority, 4 the lowest.
// LevelNone is the level of an exempt workload, and the From of a
// workload's first transition.
type Level uint8

const (
	LevelNone Level = 0
	Level1    Level = 1
	Level2    Level = 2
	Level3    Level = 3
	Level4    Level = 4
)

// NumLevels is the number of priority levels.
const NumLevels = 4

// Valid reports whether l is one of the levels 1..4.
func (l Level) Valid() bool { return l >= Level1 && l <= Level4 }

func (l Level) String() string {
	switch {
	case l == LevelNone:
		return "none"
	case l.Valid():
		return string('0' + byte(l))
	default:
		return fmt.Sprintf("invalid(%d)", uint8(l))
	}
}

// Reason says why a Transition happened.
type Reason uint8

const (
	// ReasonNew: the first observation of a workload; it enters at level 1.
	ReasonNew Reason = iota + 1
	// ReasonAllowanceUsed: the workload used up its level's allowance and
	// dropped one level.
	ReasonAllowanceUsed
	// ReasonBoost: the workload sat at level 4 for BoostAfter and went back
	// to level 1 (anti-starvation).
	ReasonBoost
	// ReasonPinned: a ddiskqos.level label put the workload at its level.
	ReasonPinned
	// ReasonUnpinned: the ddiskqos.level label went away (or became
	// invalid); the workload starts again at level 1.
	ReasonUnpinned
	// ReasonExempt: a ddiskqos.exempt=true label took the workload out of
	// the policy; the actuator must leave it, or restore it.
	ReasonExempt
	// ReasonUnexempt: the exemption went away; the workload starts at
	// level 1 (or at its pinned level, with reason ReasonPinned).
	ReasonUnexempt
	// ReasonUsageDecayed: under ModeRecent, the workload's recent usage
	// fell below half of the threshold it had crossed; it rises one level.
	ReasonUsageDecayed
)

var reasonNames = [...]string{
	ReasonNew:           "new",
	ReasonAllowanceUsed: "allowance-used",
	ReasonBoost:         "boost",
	ReasonPinned:        "pinned",
	ReasonUnpinned:      "unpinned",
	ReasonExempt:        "exempt",
	ReasonUnexempt:      "unexempt",
	ReasonUsageDecayed:  "usage-decayed",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// MarshalText makes a Reason appear by name in JSON and logs.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Transition is one change of a workload's level or of its standing
// (pinned, exempt). The daemon logs it.
type Transition struct {
	ID     string `json:"id"`
	From   Level  `json:"from"` // LevelNone on first sight and when leaving an exemption
	To     Level  `json:"to"`   // LevelNone when becoming exempt
	Reason Reason `json:"reason"`
	// BytesInLevel is what the workload had done at From when it left it;
	// for ReasonAllowanceUsed that is From's whole allowance.
	BytesInLevel uint64    `json:"bytes_in_level"`
	At           time.Time `json:"at"`
}
