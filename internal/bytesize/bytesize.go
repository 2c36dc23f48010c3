// Package bytesize reads byte counts written for people: "4k", "3MiB",
// "100MB", "1.5GiB". It is the one size syntax of ddiskqos: the config file
// and flags, the load generator and the test VM's disk size all use it.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Error is a size string Parse could not read.
type Error struct {
	Input string // the string as given
	Msg   string // what was wrong
}

func (e *Error) Error() string {
	return fmt.Sprintf("size %q: %s", e.Input, e.Msg)
}

// sizeUnits maps a lower-cased unit suffix to its multiplier. Single letters
// and the IEC names are powers of 1024 (a "4k" block is 4096 bytes, as in dd
// and fio); the SI names with a B are powers of 1000 (a "100MB" disk transfer
// is 100,000,000 bytes, as in dd). Kept as a switch so the help text and the
// parser cannot disagree on order.
func sizeUnit(u string) (int64, bool) {
	switch strings.ToLower(u) {
	case "", "b":
		return 1, true
	case "k", "kib":
		return 1 << 10, true
	case "m", "mib":
		return 1 << 20, true
	case "g", "gib":
		return 1 << 30, true
	case "t", "tib":
		return 1 << 40, true
	case "p", "pib":
		return 1 << 50, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "tb":
		return 1e12, true
	case "pb":
		return 1e15, true
	}
	return 0, false
}

// Parse reads a byte count such as "4096", "4k", "3MiB", "100MB" or
// "1.5GiB". Units are case-insensitive: B; k, m, g, t, p and KiB, MiB, GiB,
// TiB, PiB are powers of 1024; kB, MB, GB, TB, PB are powers of 1000. A
// decimal fraction is allowed when the result is a whole number of bytes.
// Spaces around the number and between number and unit are ignored.
// Errors are *Error and quote the input.
func Parse(s string) (int64, error) {
	fail := func(format string, a ...any) (int64, error) {
		return 0, &Error{Input: s, Msg: fmt.Sprintf(format, a...)}
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return fail("empty")
	}
	// Split into the number (digits and at most one '.') and the unit.
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		if t[0] == '-' {
			return fail("negative")
		}
		return fail("no number")
	}
	mult, ok := sizeUnit(unit)
	if !ok {
		return fail("unknown unit %q (want B, k, KiB, MiB, GiB, TiB, PiB, kB, MB, GB, TB or PB)", unit)
	}
	whole, frac, hasDot := strings.Cut(num, ".")
	if strings.Contains(frac, ".") {
		return fail("more than one decimal point")
	}
	if whole == "" && frac == "" {
		return fail("no digits")
	}
	var w int64
	if whole != "" {
		var err error
		w, err = strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return fail("too large")
		}
	}
	if w > math.MaxInt64/mult {
		return fail("too large")
	}
	n := w * mult
	if hasDot {
		frac = strings.TrimRight(frac, "0")
		// mult is at most 10^15 < 2^50, so with at most 18 fractional digits
		// the numerator below fits: f < 10^18 and we divide before multiplying
		// whenever that keeps the result exact.
		if len(frac) > 18 {
			return fail("too many decimal places")
		}
		if frac != "" {
			f, err := strconv.ParseInt(frac, 10, 64)
			if err != nil {
				return fail("bad fraction")
			}
			den := int64(1)
			for range len(frac) {
				den *= 10
			}
			// bytes = f * mult / den, exactly. Reduce by gcd first so the
			// product cannot overflow for any accepted input.
			g := gcd(f, den)
			f, den = f/g, den/g
			g = gcd(mult, den)
			m, den := mult/g, den/g
			if den != 1 {
				return fail("not a whole number of bytes")
			}
			if f > math.MaxInt64/m {
				return fail("too large")
			}
			add := f * m
			if n > math.MaxInt64-add {
				return fail("too large")
			}
			n += add
		}
	}
	return n, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	if a == 0 {
		return 1
	}
	return a
}
