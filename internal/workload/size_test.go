package workload

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
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
			got, err := ParseSize(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSizeErrors(t *testing.T) {
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
			got, err := ParseSize(tc.in)
			var se *SizeError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSize(%q) = %d, %v; want a *SizeError", tc.in, got, err)
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

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"50MB/s": 50e6, "50MB": 50e6, "1k/s": 1024, "7": 7} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseRate("fast/s"); err == nil || !strings.Contains(err.Error(), `"fast/s"`) {
		t.Errorf("parseRate(fast/s) error %v; want one naming the input", err)
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 1.5 * (1 << 30): "1.5 GiB"} {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%v) = %q; want %q", in, got, want)
		}
	}
}

// FuzzParseSize checks that any input either fails with a *SizeError that
// quotes it or gives a non-negative size that reads back unchanged.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4k", "3MiB", "100MB", "1.5GiB", "0.5k", "-1", "", "9223372036854775807", "9223.5PB", "8191.5P", "1..2k", " 7 gb "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			var se *SizeError
			if !errors.As(err, &se) || se.Input != s {
				t.Fatalf("ParseSize(%q): error %v is not a *SizeError naming the input", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d < 0", s, n)
		}
		back, err := ParseSize(strconv.FormatInt(n, 10))
		if err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, but %d reads back as %d, %v", s, n, n, back, err)
		}
	})
}
