package bytesize

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"4k", 4096},
		{"4K", 4096},
		{"4KiB", 4096},
		{"4kib", 4096},
		{"4kB", 4000},
		{"4KB", 4000},
		{"3MiB", 3 << 20},
		{"3m", 3 << 20},
		{"100MB", 100_000_000},
		{"1MB", 1_000_000},
		{"2G", 2 << 30},
		{"2GB", 2_000_000_000},
		{"1T", 1 << 40},
		{"1TB", 1e12},
		{"1PiB", 1 << 50},
		{"1.5GiB", 3 << 29},
		{"0.5k", 512},
		{"1.25MB", 1_250_000},
		{".5k", 512},
		{"1.", 1},
		{"1.000k", 1024},
		{"12B", 12},
		{" 3 MiB ", 3 << 20},
		{"8191P", 8191 << 50},
		{"9223372036854775807", math.MaxInt64},
		{"9223372036854775807B", math.MaxInt64},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, msg string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"-1", "negative"},
		{"-4k", "negative"},
		{"k", "no number"},
		{"MiB", "no number"},
		{".", "no digits"},
		{"3XB", `unknown unit "XB"`},
		{"4 k b", `unknown unit "k b"`},
		{"1e6", `unknown unit "e6"`},
		{"1.2.3", "more than one decimal point"},
		{"0.1", "not a whole number of bytes"},
		{"1.5B", "not a whole number of bytes"},
		{"0.0001k", "not a whole number of bytes"},
		{"9223372036854775808", "too large"},
		{"8192P", "too large"},
		{"9223372036854775807.5k", "too large"},
		{"9223.5PB", "too large"},
		{"1.0000000000000000001k", "too many decimal places"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tc.in)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) = %d, %v; want a *Error", tc.in, got, err)
			}
			if se.Input != tc.in || !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
				t.Errorf("error %q does not name the input %q", err, tc.in)
			}
			if !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("error %q; want it to say %q", err, tc.msg)
			}
		})
	}
}

// FuzzParse checks that any input either fails with a *Error that
// quotes it or gives a non-negative size that reads back unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"4k", "3MiB", "100MB", "1.5GiB", "0.5k", "-1", "", "9223372036854775807", "9223.5PB", "8191.5P", "1..2k", " 7 gb "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Input != s {
				t.Fatalf("Parse(%q): error %v is not a *Error naming the input", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("Parse(%q) = %d < 0", s, n)
		}
		back, err := Parse(strconv.FormatInt(n, 10))
		if err != nil || back != n {
			t.Fatalf("Parse(%q) = %d, but %d reads back as %d, %v", s, n, n, back, err)
		}
	})
}

// The test VM's disk sizes, which vmrig read with a parser of its own
// before: the same values, except that "GB" is now 10^9 as everywhere else.
func TestParseVMDiskSizes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"1073741824": 1 << 30, "1G": 1 << 30, "1GiB": 1 << 30, "1GB": 1e9,
		"512M": 512 << 20, "64k": 64 << 10, "2T": 2 << 40} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1G", "G", "1X", "99999999999T"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %d; want an error", bad, got)
		}
	}
}
