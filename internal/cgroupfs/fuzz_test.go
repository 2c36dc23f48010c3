package cgroupfs

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The fuzz targets check that no kernel text can panic a parser and that
// what a parser accepts survives a round trip through the kernel's format.

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n"))
	f.Add([]byte("254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=100.00\n\n"))
	f.Add([]byte("8:0 rbytes=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		devs, err := ParseIOStat(data, nil)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, d := range devs {
			fmt.Fprintf(&b, "%s rbytes=%d wbytes=%d rios=%d wios=%d dbytes=%d dios=%d\n", d.Dev, d.RBytes, d.WBytes, d.RIOs, d.WIOs, d.DBytes, d.DIOs)
		}
		again, err := ParseIOStat(b.Bytes(), nil)
		if err != nil {
			t.Fatalf("reparse of %q: %v", b.String(), err)
		}
		if len(devs) > 0 && !reflect.DeepEqual(devs, again) {
			t.Fatalf("round trip: %+v != %+v", devs, again)
		}
	})
}

func FuzzParseBlkioRWStat(f *testing.F) {
	f.Add([]byte(blkioBytes), false)
	f.Add([]byte(blkioIOs), true)
	f.Add([]byte("Total 0\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, ios bool) {
		devs, err := ParseBlkioRWStat(data, "f", ios, nil)
		if err != nil {
			return
		}
		seen := map[Dev]bool{}
		for _, d := range devs {
			if seen[d.Dev] {
				t.Fatalf("device %s listed twice", d.Dev)
			}
			seen[d.Dev] = true
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.10 avg60=0.00 avg300=0.00 total=99\n"))
	f.Add([]byte("some total=1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePressure(data)
		if err != nil {
			return
		}
		if !bytes.Contains(data, []byte("some")) {
			t.Fatalf("accepted input without a some line: %q -> %+v", data, p)
		}
		for _, v := range []float64{p.Some.Avg10, p.Some.Avg60, p.Some.Avg300, p.Full.Avg10, p.Full.Avg60, p.Full.Avg300} {
			if !(v >= 0 && v <= 100) {
				t.Fatalf("percentage %v out of range in %+v", v, p)
			}
		}
	})
}

func FuzzParseWeights(f *testing.F) {
	f.Add([]byte("default 100\n7:0 300\n"))
	f.Add([]byte("100\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWeights(data, "w")
		if err != nil {
			return
		}
		var b strings.Builder
		if w.HasDefault {
			fmt.Fprintf(&b, "default %d\n", w.Default)
		}
		for _, d := range w.Devices {
			fmt.Fprintf(&b, "%s %d\n", d.Dev, d.Value)
		}
		again, err := ParseWeights([]byte(b.String()), "w")
		if err != nil || again.Default != w.Default || len(again.Devices) != len(w.Devices) {
			t.Fatalf("round trip of %q: %+v vs %+v, %v", b.String(), again, w, err)
		}
	})
}

func FuzzParseIOMax(f *testing.F) {
	f.Add([]byte("8:16 rbps=2097152 wbps=max riops=max wiops=120\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseIOMax(data)
	})
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	f.Add("38 31 0:35 / /x\\040y rw - cgroup cgroup rw,blkio\n")
	f.Fuzz(func(t *testing.T, data string) {
		l, err := ParseMountInfo(strings.NewReader(data))
		if err != nil {
			return
		}
		switch l.Mode {
		case ModeV1, ModeV2, ModeHybrid:
		default:
			t.Fatalf("mode %q", l.Mode)
		}
		if _, err := l.IOHierarchy(); err != nil && l.Mode != ModeV1 {
			t.Fatalf("mode %s without an I/O hierarchy: %v", l.Mode, err)
		}
		// Checked without the parser: a cgroup v1 line whose last field
		// (the super options) names blkio makes blkio a v1 controller,
		// whatever the source field holds (empty: two spaces). Only lines
		// as the kernel writes them for cgroup mounts: type, source and
		// options after " - ", no space inside the options (the parser
		// keeps a space there as part of them, as cifs needs).
		for _, line := range strings.Split(data, "\n") {
			_, post, _ := strings.Cut(line, " - ")
			opts := line[strings.LastIndexByte(line, ' ')+1:]
			if strings.Count(post, " ") == 2 && strings.HasPrefix(post, "cgroup ") && slices.Contains(strings.Split(opts, ","), "blkio") {
				if _, ok := l.V1Controller("blkio"); !ok {
					t.Fatalf("blkio line %q, but no blkio hierarchy in %+v", line, l)
				}
			}
		}
	})
}

// FuzzParseMountLine: what ParseMountLine accepts, written back in the
// kernel's format (octal escapes, single spaces, an empty source as two
// spaces), parses to the same Mount.
func FuzzParseMountLine(f *testing.F) {
	f.Add("38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime shared:15 - cgroup  rw,blkio")
	f.Add(`40 22 0:50 /a\040b /tmp/x\011y rw - overlay over\040lay rw,lowerdir=/x`)
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseMountLine(line)
		if err != nil {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d %d %s %s %s %s", m.ID, m.Parent, m.Dev, escapeMount(m.Root), escapeMount(m.Mountpoint), m.Options)
		for _, o := range m.Optional {
			b.WriteString(" " + o)
		}
		fmt.Fprintf(&b, " - %s %s %s", m.FSType, escapeMount(m.Source), m.SuperOpts)
		again, err := ParseMountLine(b.String())
		if err != nil {
			t.Fatalf("%q parsed to %+v, written back as %q: %v", line, m, b.String(), err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip of %q via %q: %+v != %+v", line, b.String(), m, again)
		}
	})
}

// escapeMount writes s as the kernel's mangle() does, and also escapes '-'
// so that a field that is just "-" cannot be taken for the separator.
func escapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\', '-':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzParseProcCgroup: accepted lines are well formed and survive a round
// trip through the file's format.
func FuzzParseProcCgroup(f *testing.F) {
	f.Add("12:blkio:/docker/abc\n1:name=systemd:/x\n0::/system.slice/docker-abc.scope\n")
	f.Fuzz(func(t *testing.T, in string) {
		lines, err := ParseProcCgroup(strings.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, l := range lines {
			if l.ID < 0 || !strings.HasPrefix(l.Path, "/") {
				t.Fatalf("accepted bad line %+v from %q", l, in)
			}
			fmt.Fprintf(&b, "%d:%s:%s\n", l.ID, strings.Join(l.Controllers, ","), l.Path)
		}
		again, err := ParseProcCgroup(strings.NewReader(b.String()))
		if err != nil || len(again) != len(lines) {
			t.Fatalf("round trip of %q via %q: %+v, %v", in, b.String(), again, err)
		}
		for i := range lines {
			if lines[i].ID != again[i].ID || lines[i].Path != again[i].Path || strings.Join(lines[i].Controllers, ",") != strings.Join(again[i].Controllers, ",") {
				t.Fatalf("round trip of %q: %+v != %+v", in, lines[i], again[i])
			}
		}
	})
}

// FuzzParseFlatKeyed: what is accepted survives a round trip through the
// format, in order.
func FuzzParseFlatKeyed(f *testing.F) {
	f.Add([]byte(v2CPUStat))
	f.Add([]byte(v1MemoryStat))
	f.Fuzz(func(t *testing.T, data []byte) {
		kv, err := ParseFlatKeyed(data, "f")
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range kv {
			if p.Key == "" || strings.ContainsAny(p.Key, " \t\n") {
				t.Fatalf("accepted key %q from %q", p.Key, data)
			}
			fmt.Fprintf(&b, "%s %d\n", p.Key, p.Value)
		}
		again, err := ParseFlatKeyed([]byte(b.String()), "f")
		if err != nil || len(again) != len(kv) {
			t.Fatalf("round trip of %q via %q: %+v, %v", data, b.String(), again, err)
		}
		for i := range kv {
			if kv[i] != again[i] {
				t.Fatalf("round trip of %q: %+v != %+v", data, kv[i], again[i])
			}
		}
	})
}

// FuzzParseSingleValue: an accepted value is "max" or the number printed
// back, nothing else.
func FuzzParseSingleValue(f *testing.F) {
	f.Add([]byte("max\n"))
	f.Add([]byte("9223372036854771712\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, unlimited, err := ParseSingleValue(data, "f")
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(data))
		if unlimited {
			if s != "max" || n != 0 {
				t.Fatalf("%q: unlimited with %d", data, n)
			}
			return
		}
		if strings.TrimLeft(s, "0") != strings.TrimLeft(fmt.Sprint(n), "0") {
			t.Fatalf("%q parsed to %d", data, n)
		}
	})
}

// FuzzParseBlockStat: never panics; an accepted line prints back to the
// same first eleven fields.
func FuzzParseBlockStat(f *testing.F) {
	f.Add([]byte("1000 5 8000 300 2000 7 16000 900 3 1200 4500 0 0 0 0 10 20\n"))
	f.Add([]byte("1 0 8 0 2 0 16 0 0 5"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseBlockStat(in)
		if err != nil {
			return
		}
		line := fmt.Sprintf("%d 0 %d %d %d 0 %d 0 %d %d %d", s.ReadIOs, s.ReadSectors, s.ReadTicksMs, s.WriteIOs, s.WriteSectors, s.InFlight, s.IOTicksMs, s.TimeInQueueMs)
		if again, err := ParseBlockStat([]byte(line)); err != nil || again != s {
			t.Fatalf("round trip of %q via %q: %+v %v", in, line, again, err)
		}
	})
}

// FuzzParseTaskState: never panics; an accepted state is a letter that
// follows the last ')'.
func FuzzParseTaskState(f *testing.F) {
	f.Add([]byte("1234 (dd) D 1 1234"))
	f.Add([]byte("9 (a) b) S 1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ParseTaskState(in)
		if err != nil {
			return
		}
		i := strings.LastIndexByte(string(in), ')')
		if i < 0 || in[i+2] != c || c < 'A' || c > 'z' {
			t.Fatalf("%q: state %q", in, c)
		}
	})
}

// FuzzParseProcsBlocked: never panics.
func FuzzParseProcsBlocked(f *testing.F) {
	f.Add([]byte("procs_running 1\nprocs_blocked 3\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		n, err := ParseProcsBlocked(in)
		if err == nil && !strings.Contains(string(in), "procs_blocked") {
			t.Fatalf("%q: %d without a procs_blocked line", in, n)
		}
	})
}
