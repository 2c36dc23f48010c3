package mech

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Throttle is blk-throttle's limits, decided by the actuator's throttle
// loop (internal/throttle): v1 blkio.throttle.{read,write}_
// {bps,iops}_device, v2 io.max. Work where no scheduler honours weights,
// and beside a weight for readers that pause between requests.
const Throttle Name = "throttle"

var throttle = Mech{Name: Throttle, Knob: "throttle", Role: Caps,
	Files: func(v int) []string {
		if v == 1 {
			return []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
				"blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"}
		}
		return []string{"io.max"}
	},
	Open: func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, _ Params) (Knob, error) {
		return LimitsKnob{H: h, Dev: dev}, nil
	},
	Probe: probeThrottle,
	Needs: &Needs{V1: Need{File: "blkio.throttle.read_bps_device"}, V2: Need{File: "io.max"}},
	// Beside a scheduler's weight: weights split a device between queues
	// that stay busy, a reader that pauses between requests still waits
	// behind a streamer's budget, which the caps bound (iocost's weight
	// needs no such help).
	Beside: func(main Name, p Params) bool {
		return p.ThrottleWithWeights && (main == BFQWeight || main == CFQWeight)
	},
}

// probeThrottle: the kernel offers blk-throttle's files (or nothing could
// tell). It says what limits do; Choose puts why no weight works before.
func probeThrottle(e Env) Verdict {
	o := e.Offered[Throttle]
	if !o.usable() {
		return Verdict{Verified: o.How, Reason: fmt.Sprintf("%s is not offered (%s)", o.File, o.How)}
	}
	files := "io.max"
	if e.H.Version == 1 {
		files = "blkio.throttle.*"
	}
	return Verdict{OK: true, Verified: o.How, Reason: fmt.Sprintf("only %s limits work", files)}
}

// LimitsKnob is the throttle's knob of one device. Its value is the limits
// in io.max's words, every field given ("rbps=1048576 wbps=max riops=max
// wiops=max"), "" when none is set.
type LimitsKnob struct {
	H   cgroupfs.Hierarchy
	Dev cgroupfs.Dev
}

func (k LimitsKnob) Read(cgroup string) (string, error) {
	l, err := k.H.ReadLimits(cgroup, k.Dev)
	if err != nil {
		return "", err
	}
	return LimitsValue(l), nil
}

func (k LimitsKnob) Write(cgroup, v string) error {
	l, err := ParseLimits(v)
	if err != nil {
		return fmt.Errorf("limits of %s: %w", cgroup, err)
	}
	return k.H.SetLimits(cgroup, k.Dev, l)
}

// LimitsValue is l as a knob value.
func LimitsValue(l cgroupfs.Limits) string {
	if l.IsZero() {
		return ""
	}
	return l.Keys()
}

// ParseLimits is the inverse of LimitsValue; a key left out is unlimited.
func ParseLimits(v string) (cgroupfs.Limits, error) {
	var l cgroupfs.Limits
	for _, kv := range strings.Fields(v) {
		key, val, ok := strings.Cut(kv, "=")
		p := l.Field(key)
		if !ok || p == nil {
			return l, fmt.Errorf("limits %q: %q is not rbps, wbps, riops or wiops=N", v, kv)
		}
		if val == "max" {
			continue
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return l, fmt.Errorf("limits %q: %s is neither a number nor max", v, key)
		}
		*p = n
	}
	return l, nil
}
