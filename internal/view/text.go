// Package view turns what ddiskqos knows into text for a person: the
// daemon's snapshot (status, top), a host report (check), a cgroup's
// counters (stats). Every function here is pure — no terminal, network,
// file or clock: the time comes in as a value — so each renderer is
// golden-tested (testdata/, `go test ./internal/view -update` rewrites).
//
// text.go holds the pieces every renderer shares: cells made safe for a
// terminal, byte counts and ages as people read them, and columns laid
// out to a width (table.go).
package view

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Cell makes a string from the daemon safe to print in a table on a
// terminal: a name is whatever the cgroup directory or the container was
// called, and may carry terminal escapes (ESC ]0;title BEL retitles the
// window, CSI sequences move the cursor or clear the screen), tabs and
// newlines that would break the table, bidi overrides that reorder what is
// shown, or bytes that are not UTF-8. Every rune that is not printable
// (unicode.IsPrint; the ASCII space is kept) is shown as a Go escape:
// \t \n \r, \xNN for other ASCII controls and for bytes that are not
// UTF-8, \uNNNN or \UNNNNNNNN for the rest (C1 controls, U+202E, ...).
// Backslashes stay as they are (systemd names carry \x2d): the table is
// for reading; --json passes the daemon's JSON through unchanged.
func Cell(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[:size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		s = s[size:]
	}
	return b.String()
}

// OrDash is s escaped (Cell), or "-" when empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return Cell(s)
}

// ShortID is the first 12 characters of id (a Docker ID's short form),
// escaped like every cell.
func ShortID(id string) string {
	if utf8.RuneCountInString(id) > 12 {
		n := 0
		for i := range id {
			if n == 12 {
				id = id[:i]
				break
			}
			n++
		}
	}
	return OrDash(id)
}

// rate is a bytes/s figure as a whole number: 0 for negative or NaN.
func rate(bps float64) uint64 {
	if bps <= 0 || math.IsNaN(bps) {
		return 0
	}
	if bps >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Round(bps))
}

// Bytes is n in IEC units, one decimal below 100: 0, 512B, 1.5KiB,
// 8MiB, 120MiB.
func Bytes(n uint64) string {
	if n == 0 {
		return "0"
	}
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	var s string
	if v >= 100 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	} else {
		s = strconv.FormatFloat(v, 'f', 1, 64)
		s = strings.TrimSuffix(s, ".0")
	}
	return s + units[u]
}

// rateText is a bytes/s figure as Bytes shows it (no unit suffix).
func rateText(bps float64) string { return Bytes(rate(bps)) }

// Age is a tick's age, to 0.1 s under a minute.
func Age(d time.Duration) string {
	if d < 0 {
		return "0s (clock behind the daemon's)"
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
