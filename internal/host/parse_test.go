package host

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

func TestParseScheduler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		active  string
		offered []string
		bad     bool
	}{
		{"[none] mq-deadline kyber bfq\n", "none", []string{"none", "mq-deadline", "kyber", "bfq"}, false},
		{"none mq-deadline kyber [bfq]\n", "bfq", []string{"none", "mq-deadline", "kyber", "bfq"}, false},
		{"noop deadline [cfq]\n", "cfq", []string{"noop", "deadline", "cfq"}, false},
		{"none\n", "none", []string{"none"}, false}, // bio-based (dm, md)
		{"", "", nil, false},
		{"  \n", "", nil, false},
		{"[none] [bfq]", "", nil, true},
		{"[none mq-deadline", "", nil, true},
		{"none] bfq", "", nil, true},
		{"[]", "", nil, true},
		{"[[bfq]]", "", nil, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			active, offered, err := ParseScheduler(tc.in)
			if tc.bad {
				var pe *cgroupfs.ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want *cgroupfs.ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if active != tc.active || !slices.Equal(offered, tc.offered) {
				t.Errorf("got %q %q, want %q %q", active, offered, tc.active, tc.offered)
			}
		})
	}
}

const dockerdLimits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max stack size            8388608              unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            20000                1048576              files     
Max nice priority         0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`

func TestParseLimits(t *testing.T) {
	t.Parallel()
	ls, err := ParseLimits(strings.NewReader(dockerdLimits))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 6 {
		t.Fatalf("got %d rows, want 6: %+v", len(ls), ls)
	}
	for _, tc := range []struct {
		name       string
		soft, hard Rlimit
		unit       string
	}{
		{"Max open files", 20000, 1048576, "files"},
		{"Max processes", 96365, 96365, "processes"},
		{"Max cpu time", Unlimited, Unlimited, "seconds"},
		{"Max stack size", 8388608, Unlimited, "bytes"},
		{"Max nice priority", 0, 0, ""},
	} {
		l, ok := FindLimit(ls, tc.name)
		if !ok || l.Soft != tc.soft || l.Hard != tc.hard || l.Unit != tc.unit {
			t.Errorf("%s: got %+v (found %v), want soft %v hard %v unit %q", tc.name, l, ok, tc.soft, tc.hard, tc.unit)
		}
	}
	if _, ok := FindLimit(ls, "Max file locks"); ok {
		t.Error("found a row that is not there")
	}
	if Unlimited.String() != "unlimited" || Rlimit(5).String() != "5" {
		t.Error("Rlimit.String")
	}
	for _, bad := range []string{"Max open files 1024", "Max open files", "Max open files 1x 2 files", "Max open files 99999999999999999999999 1 files"} {
		_, err := ParseLimits(strings.NewReader(bad))
		var pe *cgroupfs.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: err = %v, want *cgroupfs.ParseError", bad, err)
		}
	}
}

func TestParseSysctlInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"32768\n", 32768, false},
		{"  4194304  ", 4194304, false},
		{"-1\n", -1, false},
		{"", 0, true},
		{"12 13", 0, true},
		{"max", 0, true},
	} {
		v, err := ParseSysctlInt("kernel.pid_max", strings.NewReader(tc.in))
		if tc.bad {
			var pe *cgroupfs.ParseError
			if !errors.As(err, &pe) {
				t.Errorf("%q: err = %v, want *cgroupfs.ParseError", tc.in, err)
			}
			continue
		}
		if err != nil || v != tc.want {
			t.Errorf("%q: got %d, %v; want %d", tc.in, v, err, tc.want)
		}
	}
}

func TestParseDockerHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, socket, base string }{
		{"unix:///var/run/docker.sock", "/var/run/docker.sock", "http://docker"},
		{"tcp://10.0.0.1:2375", "", "http://10.0.0.1:2375"},
		{"https://h:2376", "", "https://h:2376"},
	} {
		ep, err := ParseDockerHost(tc.in)
		if err != nil || ep.Socket != tc.socket || ep.Base != tc.base {
			t.Errorf("%q: got %+v, %v", tc.in, ep, err)
		}
	}
	for _, bad := range []string{"", "unix://", "ftp://x", "tcp://", "/var/run/docker.sock", "npipe:////./pipe/docker_engine", "%zz"} {
		if _, err := ParseDockerHost(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The fuzz targets check that no input panics, that errors are typed, and
// that what parses is consistent with the input.

func FuzzParseScheduler(f *testing.F) {
	for _, s := range []string{"[none] mq-deadline kyber bfq", "noop deadline [cfq]", "none", "", "[a] [b]", "[", "]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		active, offered, err := ParseScheduler(s)
		if err != nil {
			var pe *cgroupfs.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if active != "" && !slices.Contains(offered, active) {
			t.Fatalf("active %q not among offered %q", active, offered)
		}
		for _, o := range offered {
			if o == "" || strings.ContainsAny(o, "[] \t\n") {
				t.Fatalf("bad offered entry %q", o)
			}
		}
	})
}

func FuzzParseLimits(f *testing.F) {
	f.Add(dockerdLimits)
	f.Add("Max open files 1 2 files\n\nMax x unlimited unlimited")
	f.Add("Max open files 1")
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ParseLimits(strings.NewReader(s))
		if err != nil {
			var pe *cgroupfs.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, l := range ls {
			if l.Name == "" {
				t.Fatalf("row without a name: %+v", l)
			}
		}
	})
}

func FuzzParseSysctlInt(f *testing.F) {
	for _, s := range []string{"32768\n", "", "-5", "9223372036854775808", " 1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSysctlInt("x", strings.NewReader(s))
		if err != nil {
			var pe *cgroupfs.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if v != 0 && strings.TrimSpace(s) == "" {
			t.Fatalf("value %d from blank input", v)
		}
	})
}

func FuzzParseDockerHost(f *testing.F) {
	for _, s := range []string{"unix:///var/run/docker.sock", "tcp://h:2375", "https://h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ep, err := ParseDockerHost(s)
		if err == nil && ep.Socket == "" && !strings.HasPrefix(ep.Base, "http") {
			t.Fatalf("accepted %q as %+v", s, ep)
		}
	})
}
