package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

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

// LatencyMode is the latency key: whether the daemon runs the I/O latency
// sensor (eBPF, internal/iolat).
type LatencyMode string

const (
	// LatencyAuto runs the sensor where the kernel and the daemon's
	// privileges allow it; where not, the daemon logs why and runs
	// without it (the default).
	LatencyAuto LatencyMode = "auto"
	// LatencyOff never loads BPF: no per-request latency, as the
	// operator chose.
	LatencyOff LatencyMode = "off"
)

// ParseLatencyMode reads auto or off.
func ParseLatencyMode(s string) (LatencyMode, error) {
	switch m := LatencyMode(s); m {
	case LatencyAuto, LatencyOff:
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
