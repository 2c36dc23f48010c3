package cgroupfs

import (
	"bytes"
)

// The resource files beside the I/O ones (cpu, memory, pids) come in two of
// the kernel's cgroup file formats (Documentation/admin-guide/cgroup-v2.rst,
// "Interface Files"): flat keyed and single value. One parser each serves
// every file of that format, v1 and v2 alike; which keys mean what is the
// reader's business (internal/stats).

// KeyValue is one line of a flat-keyed file.
type KeyValue struct {
	Key   string
	Value uint64
}

// FlatKeyed is a flat-keyed file, lines in the kernel's order.
type FlatKeyed []KeyValue

// Get returns the value of key, and whether the file has it.
func (f FlatKeyed) Get(key string) (uint64, bool) {
	for _, kv := range f {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return 0, false
}

// ParseFlatKeyed parses a flat-keyed file, one "KEY VALUE" pair a line:
// v2 cpu.stat, memory.stat, memory.events, pids.events; v1 cpu.stat,
// cpuacct.stat, memory.stat.
//
//	usage_usec 8117436
//	user_usec 5433261
//	system_usec 2684175
//	nr_periods 0
//	nr_throttled 0
//	throttled_usec 0
//
// Blank lines are skipped. A line that is not exactly a key and an unsigned
// decimal value is a *ParseError naming file: every counter of these files
// is a count, so a value that is not one means the file is not what the
// caller thinks it is (a negative number included: the kernel prints
// counters unsigned).
func ParseFlatKeyed(data []byte, file string) (FlatKeyed, error) {
	var out FlatKeyed
	for lineNo, line := range lines(data) {
		key, r := nextField(line)
		val, r := nextField(r)
		if extra, _ := nextField(r); len(extra) != 0 || len(val) == 0 {
			return out, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "want 'KEY VALUE'"}
		}
		n, ok := parseUint(val)
		if !ok {
			return out, &ParseError{File: file, Line: lineNo, Text: string(line), Msg: "value is not an unsigned number"}
		}
		out = append(out, KeyValue{Key: string(key), Value: n})
	}
	return out, nil
}

// ParseSingleValue parses a single-value file: pids.current, pids.max,
// memory.current, memory.max, memory.peak, cpuacct.usage,
// memory.limit_in_bytes, ...
//
//	4096
//	max
//
// "max" (v2's "no limit") returns unlimited true and 0. Surrounding
// whitespace is ignored; anything else than one unsigned number or "max" is
// a *ParseError naming file.
func ParseSingleValue(data []byte, file string) (value uint64, unlimited bool, err error) {
	b := bytes.TrimSpace(data)
	if string(b) == "max" {
		return 0, true, nil
	}
	n, ok := parseUint(b)
	if !ok {
		return 0, false, &ParseError{File: file, Line: 1, Text: string(data), Msg: "want one unsigned number or max"}
	}
	return n, false, nil
}
