package cgroupfs

import (
	"bytes"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"strconv"
)

// The parsers here work on []byte rather than io.Reader: the daemon re-reads
// the same kept descriptor into one buffer every tick for up to 10,000
// cgroups, and byte parsing lets that path run without allocating.

// Dev is a block device number.
type Dev struct {
	Major, Minor uint32
}

func (d Dev) String() string {
	return strconv.FormatUint(uint64(d.Major), 10) + ":" + strconv.FormatUint(uint64(d.Minor), 10)
}

// ParseDev parses "MAJ:MIN".
func ParseDev(s string) (Dev, error) {
	d, ok := parseDevBytes([]byte(s))
	if !ok {
		return Dev{}, fmt.Errorf("device %q: want MAJ:MIN with decimal numbers", s)
	}
	return d, nil
}

func parseDevBytes(b []byte) (Dev, bool) {
	i := bytes.IndexByte(b, ':')
	if i <= 0 || i == len(b)-1 {
		return Dev{}, false
	}
	maj, ok1 := parseUint(b[:i])
	min, ok2 := parseUint(b[i+1:])
	if !ok1 || !ok2 || maj > 1<<32-1 || min > 1<<32-1 {
		return Dev{}, false
	}
	return Dev{uint32(maj), uint32(min)}, true
}

// parseUint parses a non-empty decimal number without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// DeviceIO is the I/O a cgroup did on one device since the counters began.
type DeviceIO struct {
	Dev            Dev
	RBytes, WBytes uint64
	RIOs, WIOs     uint64
	DBytes, DIOs   uint64 // discards (v2, and v1 "Discard" rows)
}

// Bytes returns read+write bytes: what the policy counts as I/O.
func (d DeviceIO) Bytes() uint64 { return d.RBytes + d.WBytes }

// IOStat is a cgroup's I/O per device, ordered as the kernel listed it.
type IOStat struct {
	Devices []DeviceIO
	// StaleIOs: the I/O counts (RIOs, WIOs, DIOs) are not of this reading
	// but of an earlier one; the bytes are (Cgroup.ReadBytes on v1, where
	// the counts are a file of their own).
	StaleIOs bool
}

// Total sums all devices; its Dev is zero.
func (s IOStat) Total() DeviceIO {
	var t DeviceIO
	for _, d := range s.Devices {
		t.RBytes += d.RBytes
		t.WBytes += d.WBytes
		t.RIOs += d.RIOs
		t.WIOs += d.WIOs
		t.DBytes += d.DBytes
		t.DIOs += d.DIOs
	}
	return t
}

// Device returns the counters of one device.
func (s IOStat) Device(dev Dev) (DeviceIO, bool) {
	for _, d := range s.Devices {
		if d.Dev == dev {
			return d, true
		}
	}
	return DeviceIO{}, false
}

// DeviceIn returns the counters of dev in devs, zeros (with Dev set) when
// dev is not there: a cgroup that did no I/O on a device has no line for it.
func DeviceIn(devs []DeviceIO, dev Dev) DeviceIO {
	if d, ok := (IOStat{Devices: devs}).Device(dev); ok {
		return d
	}
	return DeviceIO{Dev: dev}
}

// findOrAdd returns the index of dev in devs, appending a zero entry if new.
func findOrAdd(devs []DeviceIO, dev Dev) ([]DeviceIO, int) {
	for i := range devs {
		if devs[i].Dev == dev {
			return devs, i
		}
	}
	devs = append(devs, DeviceIO{Dev: dev})
	return devs, len(devs) - 1
}

// nextLine splits off the first line of b.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// ParseFile opens the file path and parses it with parse; a parse error
// names the path.
func ParseFile[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// lines yields the lines of data that are not blank, with their numbers
// (from 1, blank lines counted).
func lines(data []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		lineNo := 0
		for rest := data; len(rest) > 0; {
			var line []byte
			line, rest = nextLine(rest)
			lineNo++
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if !yield(lineNo, line) {
				return
			}
		}
	}
}

// nextField splits off the first space-separated field of b. A loop over
// the bytes, not bytes.TrimLeft and IndexAny: those build a set of the
// separators at every call, and this runs for every field of every counter
// file read (at 10,000 workloads, 8 % of the daemon's CPU went to them in
// the scale benchmark, internal/bench/scale).
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	b = b[i:]
	for j := 0; j < len(b); j++ {
		if b[j] == ' ' || b[j] == '\t' {
			return b[:j], b[j:]
		}
	}
	return b, nil
}

// nextKV splits off the first field of b as key=value. more is false when
// b holds no further field; hasEq is false for a field without '='.
func nextKV(b []byte) (key, val, rest []byte, hasEq, more bool) {
	kv, rest := nextField(b)
	if len(kv) == 0 {
		return nil, nil, nil, false, false
	}
	eq := bytes.IndexByte(kv, '=')
	if eq < 0 {
		return kv, nil, rest, false, true
	}
	return kv[:eq], kv[eq+1:], rest, true, true
}

// goneDevice is what the kernel prints for a device in a cgroup's
// counters once the device is removed (a loop device detached, a disk
// unplugged) and before the cgroup's per-device state goes with it
// (bdi_dev_name): its counters belong to no device and are skipped, not a
// parse error that would cost the workload's other devices' counters.
const goneDevice = "(unknown)"

// ParseIOStat parses cgroup v2 io.stat, appending to dst[:0]:
//
//	8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0
//	8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021
//
// Keys other than the six counters (iocost's cost.*, debug stats) are
// skipped. A device line with a malformed known key is a *ParseError.
func ParseIOStat(data []byte, dst []DeviceIO) ([]DeviceIO, error) {
	dst = dst[:0]
	for lineNo, line := range lines(data) {
		devField, kvs := nextField(line)
		if string(devField) == goneDevice {
			continue
		}
		dev, ok := parseDevBytes(devField)
		if !ok {
			return dst, &ParseError{File: "io.stat", Line: lineNo, Text: string(line), Msg: "first field is not MAJ:MIN"}
		}
		var d DeviceIO
		d.Dev = dev
		for {
			key, val, rest, hasEq, more := nextKV(kvs)
			if !more {
				break
			}
			kvs = rest
			if !hasEq {
				continue // not a key=value pair: skip, the kernel may add such
			}
			var p *uint64
			switch string(key) { // no allocation: the compiler special-cases this
			case "rbytes":
				p = &d.RBytes
			case "wbytes":
				p = &d.WBytes
			case "rios":
				p = &d.RIOs
			case "wios":
				p = &d.WIOs
			case "dbytes":
				p = &d.DBytes
			case "dios":
				p = &d.DIOs
			default:
				continue
			}
			n, ok := parseUint(val)
			if !ok {
				return dst, &ParseError{File: "io.stat", Line: lineNo, Text: string(line), Msg: fmt.Sprintf("value of %s is not a number", key)}
			}
			*p = n
		}
		dst = append(dst, d)
	}
	return dst, nil
}

// ParseBlkioRWStat parses a cgroup v1 blkio "rwstat" file —
// blkio.throttle.io_service_bytes[_recursive], blkio.throttle.io_serviced[_recursive]
// and their blkio.bfq.* counterparts — merging into dst (which it does not
// reset, so the bytes file and the serviced file can fill one slice):
//
//	7:0 Read 4096
//	7:0 Write 0
//	7:0 Sync 4096
//	7:0 Async 0
//	7:0 Discard 0
//	7:0 Total 4096
//	Total 4096
//
// ios selects which counters the values are: false for bytes, true for
// operations. The closing "Total N" line and Sync/Async/Total rows are
// skipped (they repeat Read+Write). A device with no I/O may be absent.
func ParseBlkioRWStat(data []byte, file string, ios bool, dst []DeviceIO) ([]DeviceIO, error) {
	for lineNo, line := range lines(data) {
		f1, r := nextField(line)
		f2, r := nextField(r)
		f3, r := nextField(r)
		if string(f1) == "Total" && len(f3) == 0 {
			if _, ok := parseUint(f2); !ok {
				return dst, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "Total is not a number"}
			}
			continue
		}
		if extra, _ := nextField(r); len(extra) != 0 || len(f3) == 0 {
			return dst, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "want 'MAJ:MIN Op N'"}
		}
		dev, ok := parseDevBytes(f1)
		if !ok && string(f1) != goneDevice {
			return dst, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "first field is not MAJ:MIN"}
		}
		n, ok := parseUint(f3)
		if !ok {
			return dst, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "value is not a number"}
		}
		if string(f1) == goneDevice {
			continue
		}
		var i int
		switch string(f2) {
		case "Read":
			dst, i = findOrAdd(dst, dev)
			if ios {
				dst[i].RIOs = n
			} else {
				dst[i].RBytes = n
			}
		case "Write":
			dst, i = findOrAdd(dst, dev)
			if ios {
				dst[i].WIOs = n
			} else {
				dst[i].WBytes = n
			}
		case "Discard":
			dst, i = findOrAdd(dst, dev)
			if ios {
				dst[i].DIOs = n
			} else {
				dst[i].DBytes = n
			}
		default: // Sync, Async, Total, and any future row
		}
	}
	return dst, nil
}

// PSI is one line of a pressure file.
type PSI struct {
	Avg10, Avg60, Avg300 float64 // percent of wall time stalled
	Total                uint64  // microseconds stalled in all
}

// Pressure is a cgroup's (v2 io.pressure) or the host's (/proc/pressure/io)
// pressure stall information for I/O.
type Pressure struct {
	Some    PSI  // some task stalled on I/O
	Full    PSI  // all non-idle tasks stalled on I/O at once
	HasFull bool // the kernel wrote a "full" line
}

// ParsePressure parses a PSI file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// It reads the host's /proc/pressure/io and a cgroup's io.pressure alike.
// Unknown line kinds (cpu.pressure of old kernels has only "some") and
// unknown keys are skipped; a field without "=", a known key with a bad
// value (an average outside 0..100, NaN, a total that is not a count), or a
// file without a "some" line is a *ParseError.
func ParsePressure(data []byte) (Pressure, error) {
	var p Pressure
	hasSome := false
	for lineNo, line := range lines(data) {
		kind, kvs := nextField(line)
		var dst *PSI
		switch string(kind) {
		case "some":
			dst, hasSome = &p.Some, true
		case "full":
			dst, p.HasFull = &p.Full, true
		default:
			continue
		}
		for {
			key, val, rest, hasEq, more := nextKV(kvs)
			if !more {
				break
			}
			kvs = rest
			if !hasEq {
				return p, &ParseError{File: "pressure", Line: lineNo, Text: string(line), Msg: "want key=value"}
			}
			var err error
			switch string(key) {
			case "avg10":
				dst.Avg10, err = parsePercent(val)
			case "avg60":
				dst.Avg60, err = parsePercent(val)
			case "avg300":
				dst.Avg300, err = parsePercent(val)
			case "total":
				n, ok := parseUint(val)
				if !ok {
					err = fmt.Errorf("not a number")
				}
				dst.Total = n
			}
			if err != nil {
				return p, &ParseError{File: "pressure", Line: lineNo, Text: string(line), Msg: fmt.Sprintf("value of %s: %v", key, err)}
			}
		}
	}
	if !hasSome {
		n := bytes.Count(data, []byte{'\n'}) // the number of lines
		if len(data) > 0 && data[len(data)-1] != '\n' {
			n++
		}
		return p, &ParseError{File: "pressure", Line: n, Text: string(data), Msg: "no 'some' line"}
	}
	return p, nil
}

// parsePercent parses a PSI average: a percentage of wall time, 0..100.
func parsePercent(b []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("%v out of range 0..100", v)
	}
	return v, nil
}

// DeviceValue is one "MAJ:MIN value" line of a per-device knob.
type DeviceValue struct {
	Dev   Dev
	Value uint64
}

// Weights is the content of a weight file: blkio.bfq.weight_device,
// blkio.weight_device, io.bfq.weight, io.weight.
//
//	default 100
//	7:0 300
//
// v1 blkio.weight_device (CFQ) has no default line; v1 blkio.bfq.weight and
// blkio.weight hold a bare number (the default).
type Weights struct {
	Default    uint64 // 0 when the file has no default
	HasDefault bool
	Devices    []DeviceValue
}

// Device returns the per-device weight, if one is set.
func (w Weights) Device(d Dev) (uint64, bool) {
	for _, dv := range w.Devices {
		if dv.Dev == d {
			return dv.Value, true
		}
	}
	return 0, false
}

// ParseWeights parses any weight file (see Weights).
func ParseWeights(data []byte, file string) (Weights, error) {
	var w Weights
	for lineNo, line := range lines(data) {
		f1, r := nextField(line)
		f2, r := nextField(r)
		if extra, _ := nextField(r); len(extra) != 0 {
			return w, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "too many fields"}
		}
		if len(f2) == 0 { // a bare number: the default weight (v1)
			n, ok := parseUint(f1)
			if !ok {
				return w, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "weight is not a number"}
			}
			w.Default, w.HasDefault = n, true
			continue
		}
		n, ok := parseUint(f2)
		if !ok {
			return w, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "weight is not a number"}
		}
		if string(f1) == "default" {
			w.Default, w.HasDefault = n, true
			continue
		}
		if string(f1) == goneDevice {
			continue
		}
		dev, ok := parseDevBytes(f1)
		if !ok {
			return w, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "want 'default N' or 'MAJ:MIN N'"}
		}
		w.Devices = append(w.Devices, DeviceValue{Dev: dev, Value: n})
	}
	return w, nil
}

// Limits are throttling limits on one device; 0 means unlimited.
type Limits struct {
	RBps, WBps, RIOps, WIOps uint64
}

// Field is l's field named by io.max's key (rbps, wbps, riops, wiops);
// nil for any other key.
func (l *Limits) Field(key string) *uint64 {
	switch key {
	case "rbps":
		return &l.RBps
	case "wbps":
		return &l.WBps
	case "riops":
		return &l.RIOps
	case "wiops":
		return &l.WIOps
	}
	return nil
}

// IsZero reports whether no limit is set.
func (l Limits) IsZero() bool { return l == Limits{} }

// Keys is l in io.max's key form, "rbps=N wbps=max riops=max wiops=N"
// (0, unlimited, is "max"): the line io.max takes after the device, and
// the text a limit knob's value is kept as.
func (l Limits) Keys() string {
	v := func(n uint64) string {
		if n == 0 {
			return "max"
		}
		return strconv.FormatUint(n, 10)
	}
	return "rbps=" + v(l.RBps) + " wbps=" + v(l.WBps) + " riops=" + v(l.RIOps) + " wiops=" + v(l.WIOps)
}

// ParseIOMax parses cgroup v2 io.max:
//
//	8:16 rbps=2097152 wbps=max riops=max wiops=120
//
// "max" is unlimited (0 here). Unknown keys are skipped.
func ParseIOMax(data []byte) (map[Dev]Limits, error) {
	out := map[Dev]Limits{}
	for lineNo, line := range lines(data) {
		devField, kvs := nextField(line)
		dev, ok := parseDevBytes(devField)
		if !ok && string(devField) != goneDevice {
			return nil, &ParseError{File: "io.max", Line: lineNo, Text: string(line), Msg: "first field is not MAJ:MIN"}
		}
		var l Limits
		for {
			key, val, rest, hasEq, more := nextKV(kvs)
			if !more {
				break
			}
			kvs = rest
			if !hasEq {
				return nil, &ParseError{File: "io.max", Line: lineNo, Text: string(line), Msg: "want key=value"}
			}
			p := l.Field(string(key))
			if p == nil {
				continue
			}
			if string(val) == "max" {
				*p = 0
				continue
			}
			n, ok := parseUint(val)
			if !ok {
				return nil, &ParseError{File: "io.max", Line: lineNo, Text: string(line), Msg: fmt.Sprintf("value of %s is neither a number nor max", key)}
			}
			*p = n
		}
		if ok { // not a removed device's line (goneDevice)
			out[dev] = l
		}
	}
	return out, nil
}

// ParseDeviceValues parses a v1 per-device file such as
// blkio.throttle.read_bps_device or blkio.weight_device:
//
//	7:0 1048576
func ParseDeviceValues(data []byte, file string) ([]DeviceValue, error) {
	w, err := ParseWeights(data, file)
	if err != nil {
		return nil, err
	}
	if w.HasDefault {
		return nil, &ParseError{File: file, Line: 1, Text: string(data), Msg: "unexpected default line in a per-device file"}
	}
	return w.Devices, nil
}
