package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/devhealth"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// The values below have a structure of their own. Each is decoded once,
// by its UnmarshalText, from the file (decode), a flag (flagDefs) or code,
// into the typed value the daemon uses: a bad one is an error that names
// the key, the value and where it came from, and the configuration is not
// applied. MarshalText writes it back as it reads.

// CgroupPin is one cgroup_levels entry, "GLOB=LEVEL": the cgroup source's
// workloads whose names match Glob are pinned at Level. The last "=" splits,
// so a glob may hold one.
type CgroupPin struct {
	Glob  string
	Level int // 1..policy.NumLevels
}

// ParseCgroupPin reads a "GLOB=LEVEL" entry.
func ParseCgroupPin(s string) (CgroupPin, error) {
	i := strings.LastIndex(s, "=")
	if i < 0 {
		return CgroupPin{}, errors.New("want GLOB=LEVEL, such as db-*=1")
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		n = 0 // reported by problem with the text as written
	}
	p := CgroupPin{Glob: s[:i], Level: n}
	if msg := p.problem(s[i+1:]); msg != "" {
		return CgroupPin{}, errors.New(msg)
	}
	return p, nil
}

// problem says what is wrong with p; level is its level as written.
func (p CgroupPin) problem(level string) string {
	if msg := nameGlobProblem(p.Glob); msg != "" {
		return msg
	}
	if p.Level < 1 || p.Level > policy.NumLevels {
		return fmt.Sprintf("level %q of pattern %q must be 1 to %d", level, p.Glob, policy.NumLevels)
	}
	return ""
}

func (p CgroupPin) String() string { return p.Glob + "=" + strconv.Itoa(p.Level) }

// UnmarshalText reads p as ParseCgroupPin does.
func (p *CgroupPin) UnmarshalText(b []byte) error {
	v, err := ParseCgroupPin(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// MarshalText writes p as GLOB=LEVEL.
func (p CgroupPin) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// HealthModel is one health.models entry, "DEVICE=MODEL": the burst-credit
// model of the device named as in /sys/block. MODEL is a vendor preset with
// the volume's size (aws-gp2:100GiB) or the plain form
// iops=BASE/BURST/BUCKET and/or bps=BASE/BURST/BUCKET (devhealth.ParseModel).
type HealthModel struct {
	Device string
	Model  devhealth.Model
	// Spec is MODEL as written, for MarshalText and messages.
	Spec string
}

// ParseHealthModel reads a "DEVICE=MODEL" entry.
func ParseHealthModel(s string) (HealthModel, error) {
	dev, spec, ok := strings.Cut(s, "=")
	dev, spec = strings.TrimSpace(dev), strings.TrimSpace(spec)
	if !ok || dev == "" || strings.ContainsAny(dev, "/ ") {
		return HealthModel{}, errors.New("want DEVICE=MODEL, such as nvme1n1=aws-gp2:100GiB or sdb=iops=100/3000/5400000")
	}
	m, err := devhealth.ParseModel(spec, func(s string) (int64, error) {
		z, err := ParseSize(s)
		return int64(z), err
	})
	if err != nil {
		return HealthModel{}, err
	}
	return HealthModel{Device: dev, Model: m, Spec: spec}, nil
}

func (h HealthModel) String() string { return h.Device + "=" + h.Spec }

// UnmarshalText reads h as ParseHealthModel does.
func (h *HealthModel) UnmarshalText(b []byte) error {
	v, err := ParseHealthModel(string(b))
	if err == nil {
		*h = v
	}
	return err
}

// MarshalText writes h as DEVICE=MODEL.
func (h HealthModel) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// PolicyMode is the policy key, the levels' rule: recent or paper.
type PolicyMode policy.Mode

// ParsePolicyMode reads recent or paper.
func ParsePolicyMode(s string) (PolicyMode, error) {
	m, err := policy.ParseMode(s)
	if err != nil {
		return 0, errors.New("want recent (usage decays: the level follows what a workload does now) or paper (dDiskQoS's cumulative allowances and boost)")
	}
	return PolicyMode(m), nil
}

func (m PolicyMode) String() string { return policy.Mode(m).String() }

// UnmarshalText reads m as ParsePolicyMode does.
func (m *PolicyMode) UnmarshalText(b []byte) error {
	v, err := ParsePolicyMode(string(b))
	if err == nil {
		*m = v
	}
	return err
}

// MarshalText writes m as it reads.
func (m PolicyMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// LogLevel is log.level: debug, info, warn or error.
type LogLevel slog.Level

var logLevels = map[string]LogLevel{
	"debug": LogLevel(slog.LevelDebug), "info": LogLevel(slog.LevelInfo),
	"warn": LogLevel(slog.LevelWarn), "error": LogLevel(slog.LevelError),
}

// ParseLogLevel reads debug, info, warn or error.
func ParseLogLevel(s string) (LogLevel, error) {
	if l, ok := logLevels[s]; ok {
		return l, nil
	}
	return 0, errors.New("must be debug, info, warn or error")
}

func (l LogLevel) String() string { return strings.ToLower(slog.Level(l).String()) }

// UnmarshalText reads l as ParseLogLevel does.
func (l *LogLevel) UnmarshalText(b []byte) error {
	v, err := ParseLogLevel(string(b))
	if err == nil {
		*l = v
	}
	return err
}

// MarshalText writes l as it reads.
func (l LogLevel) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// LatencyTarget is the latency_target key, the latency controller's target
// for the protected requests' p99 on each throttled device
// (internal/control): "auto" (the default: 2× the device's unloaded
// latency, learned), "NUMx" (NUM ≥ 1 times it), a duration ("2ms": fixed),
// or "off" (no controller: the throttle keeps its fixed share). It holds
// its text in canonical form; Spec reads it.
type LatencyTarget string

// Latency targets' words.
const (
	LatencyAuto LatencyTarget = "auto"
	LatencyOff  LatencyTarget = "off"
)

// ParseLatencyTarget reads auto, off, NUMx or a duration.
func ParseLatencyTarget(s string) (LatencyTarget, error) {
	const want = "want auto (2x the device's unloaded latency), NUMx (such as 5x), a duration (such as 2ms) or off"
	switch s {
	case "", string(LatencyAuto):
		return LatencyAuto, nil
	case string(LatencyOff):
		return LatencyOff, nil
	}
	if n, ok := strings.CutSuffix(s, "x"); ok {
		m, err := strconv.ParseFloat(n, 64)
		if err != nil || m < 1 || m > 1000 {
			return "", errors.New("multiple " + strconv.Quote(n) + " must be a number from 1 to 1000; " + want)
		}
		return LatencyTarget(strconv.FormatFloat(m, 'g', -1, 64) + "x"), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return "", errors.New(want)
	}
	return LatencyTarget(d.String()), nil
}

// Spec is what t asks for: off, or a fixed target, or a multiple of the
// learned unloaded latency (both 0: the default multiple).
func (t LatencyTarget) Spec() (off bool, fixed time.Duration, multiple float64) {
	v, err := ParseLatencyTarget(string(t))
	if err != nil || v == LatencyAuto {
		return false, 0, 0
	}
	if v == LatencyOff {
		return true, 0, 0
	}
	if n, ok := strings.CutSuffix(string(v), "x"); ok {
		m, _ := strconv.ParseFloat(n, 64)
		return false, 0, m
	}
	d, _ := time.ParseDuration(string(v))
	return false, d, 0
}

func (t LatencyTarget) String() string { return string(t) }

// UnmarshalText reads t as ParseLatencyTarget does.
func (t *LatencyTarget) UnmarshalText(b []byte) error {
	v, err := ParseLatencyTarget(string(b))
	if err == nil {
		*t = v
	}
	return err
}

// MarshalText writes t as it reads.
func (t LatencyTarget) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// LatencyMode is the latency key: whether the daemon runs the I/O latency
// sensor (eBPF, internal/iolat), and with it the latency controller.
type LatencyMode string

const (
	// LatencyModeAuto runs the sensor where the kernel and the daemon's
	// privileges allow it; where not, the daemon logs why and runs
	// without it (the default).
	LatencyModeAuto LatencyMode = "auto"
	// LatencyModeOff never loads BPF: no per-request latency, and no
	// latency controller (latency_target), as the operator chose.
	LatencyModeOff LatencyMode = "off"
)

// ParseLatencyMode reads auto or off.
func ParseLatencyMode(s string) (LatencyMode, error) {
	switch m := LatencyMode(s); m {
	case LatencyModeAuto, LatencyModeOff:
		return m, nil
	}
	return "", errors.New("want auto (the eBPF latency sensor where the kernel and privileges allow) or off (never load BPF)")
}

func (m LatencyMode) String() string { return string(m) }

// UnmarshalText reads m as ParseLatencyMode does.
func (m *LatencyMode) UnmarshalText(b []byte) error {
	v, err := ParseLatencyMode(string(b))
	if err == nil {
		*m = v
	}
	return err
}

// MarshalText writes m as it reads.
func (m LatencyMode) MarshalText() ([]byte, error) { return []byte(m), nil }
