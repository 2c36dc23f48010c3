package cgroupfs

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
)

// CostModel is one device's line of the v2 root's io.cost.model: iocost's
// linear model of what the device can do, from which it prices each request.
type CostModel struct {
	Dev  Dev
	Ctrl string // "auto": the kernel's defaults for the device class; "user": written by someone
	// Model is "linear", the only model the kernel has.
	Model string
	// The device's capacity as the model sees it: sequential bytes/s, and
	// 4 KiB sequential and random requests per second, for reads and writes.
	RBps, RSeqIOPS, RRandIOPS uint64
	WBps, WSeqIOPS, WRandIOPS uint64
}

// Line renders m as written to io.cost.model: with Ctrl "user" the model
// and all six coefficients, otherwise "ctrl=auto", which asks the kernel
// for its defaults again.
func (m CostModel) Line() string {
	if m.Ctrl != "user" {
		return m.Dev.String() + " ctrl=auto"
	}
	return fmt.Sprintf("%s ctrl=user model=linear rbps=%d rseqiops=%d rrandiops=%d wbps=%d wseqiops=%d wrandiops=%d",
		m.Dev, m.RBps, m.RSeqIOPS, m.RRandIOPS, m.WBps, m.WSeqIOPS, m.WRandIOPS)
}

// ParseCostModel parses io.cost.model (block/blk-iocost.c,
// ioc_cost_model_prfill):
//
//	8:16 ctrl=auto model=linear rbps=2706339840 rseqiops=89698 rrandiops=110036 wbps=1063126016 wseqiops=135560 wrandiops=130734
//
// Unknown keys are skipped; a malformed device, a field without "=" or a
// coefficient that is not a count is a *ParseError. Blank lines are ignored.
func ParseCostModel(data []byte) ([]CostModel, error) {
	var out []CostModel
	err := eachDeviceLine(data, "io.cost.model", func(dev Dev, key, val []byte) error {
		if key == nil {
			out = append(out, CostModel{Dev: dev})
			return nil
		}
		m := &out[len(out)-1]
		var dst *uint64
		switch string(key) {
		case "ctrl":
			m.Ctrl = string(val)
			return nil
		case "model":
			m.Model = string(val)
			return nil
		case "rbps":
			dst = &m.RBps
		case "rseqiops":
			dst = &m.RSeqIOPS
		case "rrandiops":
			dst = &m.RRandIOPS
		case "wbps":
			dst = &m.WBps
		case "wseqiops":
			dst = &m.WSeqIOPS
		case "wrandiops":
			dst = &m.WRandIOPS
		default:
			return nil
		}
		n, ok := parseUint(val)
		if !ok {
			return fmt.Errorf("%s=%q: not a count", key, val)
		}
		*dst = n
		return nil
	})
	return out, err
}

// CostQoS is one device's line of the v2 root's io.cost.qos: whether
// iocost is on for the device, the latency targets that tell it the device
// is saturated and the bounds of its virtual rate.
type CostQoS struct {
	Dev    Dev
	Enable bool
	Ctrl   string // "auto": the kernel's defaults; "user": written by someone
	// RPct and WPct are the percentiles (0..100) of read and write
	// completion latency that must stay at or under RLat and WLat
	// (microseconds); 0 percent means no latency target.
	RPct, WPct float64
	RLat, WLat uint64
	// Min and Max bound vrate, the speed iocost runs the device at relative
	// to its model, in percent.
	Min, Max float64
}

// Line renders q as written to io.cost.qos; with Ctrl "user" every value
// is set, otherwise "ctrl=auto" asks the kernel for its defaults.
func (q CostQoS) Line() string {
	enable := 0
	if q.Enable {
		enable = 1
	}
	if q.Ctrl != "user" {
		return fmt.Sprintf("%s enable=%d ctrl=auto", q.Dev, enable)
	}
	return fmt.Sprintf("%s enable=%d ctrl=user rpct=%.2f rlat=%d wpct=%.2f wlat=%d min=%.2f max=%.2f",
		q.Dev, enable, q.RPct, q.RLat, q.WPct, q.WLat, q.Min, q.Max)
}

// ParseCostQoS parses io.cost.qos (block/blk-iocost.c, ioc_qos_prfill):
//
//	8:16 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=20000 min=50.00 max=150.00
//
// A device appears once iocost was configured for it. Unknown keys are
// skipped; a malformed device, a field without "=", an enable other than
// 0 or 1, a percentile outside 0..100, a latency that is not a count or a
// negative or non-finite vrate bound is a *ParseError. Blank lines are
// ignored.
func ParseCostQoS(data []byte) ([]CostQoS, error) {
	var out []CostQoS
	err := eachDeviceLine(data, "io.cost.qos", func(dev Dev, key, val []byte) error {
		if key == nil {
			out = append(out, CostQoS{Dev: dev})
			return nil
		}
		q := &out[len(out)-1]
		var err error
		switch string(key) {
		case "enable":
			switch string(val) {
			case "0":
				q.Enable = false
			case "1":
				q.Enable = true
			default:
				return fmt.Errorf("enable=%q: want 0 or 1", val)
			}
		case "ctrl":
			q.Ctrl = string(val)
		case "rpct":
			q.RPct, err = parsePercent(val)
		case "wpct":
			q.WPct, err = parsePercent(val)
		case "rlat", "wlat":
			n, ok := parseUint(val)
			if !ok {
				return fmt.Errorf("%s=%q: not a count of microseconds", key, val)
			}
			if key[0] == 'r' {
				q.RLat = n
			} else {
				q.WLat = n
			}
		case "min", "max":
			v, perr := strconv.ParseFloat(string(val), 64)
			if perr != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return fmt.Errorf("%s=%q: want a percentage of at least 0", key, val)
			}
			if key[1] == 'i' {
				q.Min = v
			} else {
				q.Max = v
			}
		}
		if err != nil {
			return fmt.Errorf("%s=%q: %v", key, val, err)
		}
		return nil
	})
	return out, err
}

// eachDeviceLine walks a per-device key=value file ("MAJ:MIN k=v k=v"):
// for each line it calls fn once with key nil (a new device), then once per
// field. An error from fn, a bad device or a field without "=" becomes a
// *ParseError naming file, line and text.
func eachDeviceLine(data []byte, file string, fn func(dev Dev, key, val []byte) error) error {
	for lineNo, line := range lines(data) {
		perr := func(msg string) error {
			return &ParseError{File: file, Line: lineNo, Text: string(line), Msg: msg}
		}
		devField, kvs := nextField(line)
		dev, ok := parseDevBytes(devField)
		if !ok {
			return perr(fmt.Sprintf("device %q: want MAJ:MIN with decimal numbers", devField))
		}
		if err := fn(dev, nil, nil); err != nil {
			return perr(err.Error())
		}
		for {
			key, val, r, hasEq, more := nextKV(kvs)
			if !more {
				break
			}
			kvs = r
			if !hasEq {
				return perr(fmt.Sprintf("field %q: want key=value", key))
			}
			if err := fn(dev, key, val); err != nil {
				return perr(err.Error())
			}
		}
	}
	return nil
}

// ReadCostModel reads the root's io.cost.model (v2 only; ErrNotAvailable
// without iocost).
func (h Hierarchy) ReadCostModel() ([]CostModel, error) {
	return readParsed(filepath.Join(h.Mount, "io.cost.model"), ParseCostModel)
}

// ReadCostQoS reads the root's io.cost.qos (v2 only; ErrNotAvailable
// without iocost).
func (h Hierarchy) ReadCostQoS() ([]CostQoS, error) {
	return readParsed(filepath.Join(h.Mount, "io.cost.qos"), ParseCostQoS)
}

// WriteCostModel writes one line to the root's io.cost.model.
func (h Hierarchy) WriteCostModel(line string) error {
	return writeKnob(filepath.Join(h.Mount, "io.cost.model"), line)
}

// WriteCostQoS writes one line to the root's io.cost.qos.
func (h Hierarchy) WriteCostQoS(line string) error {
	return writeKnob(filepath.Join(h.Mount, "io.cost.qos"), line)
}

// FindCostModel returns dev's line of ms.
func FindCostModel(ms []CostModel, dev Dev) (CostModel, bool) {
	for _, m := range ms {
		if m.Dev == dev {
			return m, true
		}
	}
	return CostModel{}, false
}

// FindCostQoS returns dev's line of qs.
func FindCostQoS(qs []CostQoS, dev Dev) (CostQoS, bool) {
	for _, q := range qs {
		if q.Dev == dev {
			return q, true
		}
	}
	return CostQoS{}, false
}
