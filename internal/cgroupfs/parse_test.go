package cgroupfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseIOStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []DeviceIO
		wantErr bool
	}{
		{name: "empty", in: "", want: []DeviceIO{}},
		{
			name: "two devices",
			in: "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n" +
				"8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021\n",
			want: []DeviceIO{
				{Dev: Dev{8, 16}, RBytes: 1459200, WBytes: 314773504, RIOs: 192, WIOs: 353},
				{Dev: Dev{8, 0}, RBytes: 90430464, WBytes: 299008000, RIOs: 8950, WIOs: 1252, DBytes: 50331648, DIOs: 3021},
			},
		},
		{
			name: "iocost keys and blank lines skipped",
			in:   "\n254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=12 cost.wait=0 cost.indebt=0 cost.indelay=0\n\n",
			want: []DeviceIO{{Dev: Dev{254, 0}, RBytes: 4096, RIOs: 1}},
		},
		{name: "no trailing newline", in: "7:0 rbytes=1 wbytes=2", want: []DeviceIO{{Dev: Dev{7, 0}, RBytes: 1, WBytes: 2}}},
		{
			// A device removed a moment ago (a loop device detached), its
			// blkg not yet gone: the kernel names it "(unknown)".
			name: "device gone",
			in:   "(unknown) rbytes=3145728 wbytes=0 rios=12 wios=0 dbytes=0 dios=0\n8:0 rbytes=1 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
			want: []DeviceIO{{Dev: Dev{8, 0}, RBytes: 1, RIOs: 1}},
		},
		{name: "bad device", in: "sda rbytes=1\n", wantErr: true},
		{name: "bad number", in: "8:0 rbytes=12x\n", wantErr: true},
		{name: "negative", in: "8:0 rbytes=-1\n", wantErr: true},
		{name: "overflow", in: "8:0 rbytes=99999999999999999999999\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseIOStat([]byte(tt.in), nil)
			if tt.wantErr {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestIOStatTotalAndDevice(t *testing.T) {
	t.Parallel()
	s := IOStat{Devices: []DeviceIO{
		{Dev: Dev{8, 0}, RBytes: 10, WBytes: 5, RIOs: 1},
		{Dev: Dev{7, 3}, RBytes: 1, WBytes: 2, WIOs: 4},
	}}
	if got := s.Total(); got.Bytes() != 18 || got.RIOs != 1 || got.WIOs != 4 {
		t.Fatalf("Total = %+v", got)
	}
	if d, ok := s.Device(Dev{7, 3}); !ok || d.WBytes != 2 {
		t.Fatalf("Device(7:3) = %+v, %v", d, ok)
	}
	if _, ok := s.Device(Dev{1, 1}); ok {
		t.Fatal("Device(1:1) found")
	}
}

const blkioBytes = `7:0 Read 4096
7:0 Write 8192
7:0 Sync 4096
7:0 Async 8192
7:0 Discard 512
7:0 Total 12288
253:0 Read 1
253:0 Write 0
253:0 Sync 0
253:0 Async 0
253:0 Discard 0
253:0 Total 1
Total 12289
`

const blkioIOs = `7:0 Read 1
7:0 Write 2
7:0 Sync 1
7:0 Async 2
7:0 Discard 1
7:0 Total 3
Total 3
`

func TestParseBlkioRWStat(t *testing.T) {
	t.Parallel()
	got, err := ParseBlkioRWStat([]byte(blkioBytes), "blkio.throttle.io_service_bytes", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseBlkioRWStat([]byte(blkioIOs), "blkio.throttle.io_serviced", true, got)
	if err != nil {
		t.Fatal(err)
	}
	want := []DeviceIO{
		{Dev: Dev{7, 0}, RBytes: 4096, WBytes: 8192, DBytes: 512, RIOs: 1, WIOs: 2, DIOs: 1},
		{Dev: Dev{253, 0}, RBytes: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// The bfq.* files on kernels without BFQ debug: just a Total.
	got, err = ParseBlkioRWStat([]byte("Total 0\n"), "blkio.bfq.io_service_bytes", false, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("Total-only file: %+v, %v", got, err)
	}
	// A device removed a moment ago (a loop device detached), its blkg not
	// yet gone: the kernel names it "(unknown)" (seen in a real run of
	// TestRealRunDeviceRemoved). Its counters belong to no device; the
	// others' still count.
	got, err = ParseBlkioRWStat([]byte("(unknown) Read 3145728\n(unknown) Write 0\n(unknown) Total 3145728\n"+blkioIOs),
		"blkio.throttle.io_serviced_recursive", true, nil)
	if want := []DeviceIO{{Dev: Dev{7, 0}, RIOs: 1, WIOs: 2, DIOs: 1}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("file with a gone device: %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"7:0 Read\n", "7:0 Read x\n", "x:0 Read 1\n", "7:0 Read 1 2\n", "Total x\n", "(unknown) Read x\n"} {
		if _, err := ParseBlkioRWStat([]byte(bad), "f", false, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParsePressure(t *testing.T) {
	t.Parallel()
	in := "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.10 avg60=0.00 avg300=0.00 total=99\n"
	p, err := ParsePressure([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Pressure{Some: PSI{Avg10: 1.5, Avg60: 0.25, Total: 12345}, Full: PSI{Avg10: 0.1, Total: 99}, HasFull: true}
	if p != want {
		t.Fatalf("got %+v want %+v", p, want)
	}
	p, err = ParsePressure([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"))
	if err != nil || p.HasFull || p.Some.Total != 7 {
		t.Fatalf("some-only: %+v %v", p, err)
	}
	// The host's /proc/pressure/io as psi.rst shows it.
	p, err = ParsePressure([]byte("some avg10=0.13 avg60=0.24 avg300=0.34 total=2256196\nfull avg10=0.13 avg60=0.21 avg300=0.31 total=2134438\n"))
	want = Pressure{Some: PSI{0.13, 0.24, 0.34, 2256196}, Full: PSI{0.13, 0.21, 0.31, 2134438}, HasFull: true}
	if err != nil || p != want {
		t.Fatalf("psi.rst example: %+v, %v", p, err)
	}
	// Unknown keys and line kinds are skipped.
	p, err = ParsePressure([]byte("some avg10=1.00 avg60=0.00 avg300=0.00 total=5 extra=1\nweird line\n"))
	if err != nil || p.HasFull || p.Some.Avg10 != 1 || p.Some.Total != 5 {
		t.Errorf("unknown key and line: %+v, %v", p, err)
	}
	if p, err := ParsePressure([]byte("some avg10=100.00 avg60=0 avg300=0 total=0")); err != nil || p.Some.Avg10 != 100 {
		t.Errorf("100%%: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "full avg10=0.00 total=1\n", "some avg10=x\n", "some total=-1\n", "some avg10\n",
		"some avg10=101.00", "some avg60=-0.5", "some avg300=NaN", "some avg10=Inf", "some total=1.5"} {
		var pe *ParseError
		if _, err := ParsePressure([]byte(bad)); !errors.As(err, &pe) {
			t.Errorf("%q: err = %v, want *ParseError", bad, err)
		}
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Weights
	}{
		{"100\n", Weights{Default: 100, HasDefault: true}},
		{"default 100\n", Weights{Default: 100, HasDefault: true}},
		{"default 100\n7:0 300\n8:16 10\n", Weights{Default: 100, HasDefault: true, Devices: []DeviceValue{{Dev{7, 0}, 300}, {Dev{8, 16}, 10}}}},
		{"", Weights{}},
		// A removed device's line (see ParseIOStat's test) is no device's.
		{"default 100\n(unknown) 300\n7:0 500\n", Weights{Default: 100, HasDefault: true, Devices: []DeviceValue{{Dev{7, 0}, 500}}}},
	}
	for _, tt := range tests {
		got, err := ParseWeights([]byte(tt.in), "w")
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Fatalf("%q: got %+v want %+v", tt.in, got, tt.want)
		}
	}
	w, _ := ParseWeights([]byte("default 100\n7:0 300\n"), "w")
	if v, ok := w.Device(Dev{7, 0}); !ok || v != 300 {
		t.Fatalf("Device = %d %v", v, ok)
	}
	for _, bad := range []string{"default x\n", "7:0\n x", "7:0 1 2\n", "sda 5\n", "x\n"} {
		if _, err := ParseWeights([]byte(bad), "w"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseIOMax(t *testing.T) {
	t.Parallel()
	m, err := ParseIOMax([]byte("8:16 rbps=2097152 wbps=max riops=max wiops=120\n7:0 rbps=max wbps=max riops=max wiops=max\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m[Dev{8, 16}]; got != (Limits{RBps: 2097152, WIOps: 120}) {
		t.Fatalf("8:16 = %+v", got)
	}
	if got := m[Dev{7, 0}]; !got.IsZero() {
		t.Fatalf("7:0 = %+v", got)
	}
	m, err = ParseIOMax([]byte("(unknown) rbps=1 wbps=max riops=max wiops=max\n8:0 rbps=5 wbps=max riops=max wiops=max\n"))
	if err != nil || len(m) != 1 || m[Dev{8, 0}] != (Limits{RBps: 5}) {
		t.Fatalf("io.max with a removed device's line: %+v, %v", m, err)
	}
	for _, bad := range []string{"8:16 rbps=x\n", "x rbps=1\n", "8:0 rbps\n", "(unknown) rbps=x\n"} {
		if _, err := ParseIOMax([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseDeviceValues(t *testing.T) {
	t.Parallel()
	v, err := ParseDeviceValues([]byte("7:0 1048576\n"), "blkio.throttle.read_bps_device")
	if err != nil || len(v) != 1 || v[0] != (DeviceValue{Dev{7, 0}, 1048576}) {
		t.Fatalf("%+v %v", v, err)
	}
	v, err = ParseDeviceValues([]byte("(unknown) 5\n7:0 1048576\n"), "blkio.throttle.read_bps_device")
	if err != nil || len(v) != 1 || v[0] != (DeviceValue{Dev{7, 0}, 1048576}) {
		t.Fatalf("with a removed device's line: %+v %v", v, err)
	}
	if _, err := ParseDeviceValues([]byte("default 5\n"), "f"); err == nil {
		t.Fatal("default line accepted in a per-device file")
	}
}

func TestParseDev(t *testing.T) {
	t.Parallel()
	if d, err := ParseDev("259:3"); err != nil || d != (Dev{259, 3}) || d.String() != "259:3" {
		t.Fatalf("%v %v", d, err)
	}
	for _, bad := range []string{"", ":", "1:", ":1", "a:b", "1:2:3", "4294967296:0"} {
		if _, err := ParseDev(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseMountInfo(t *testing.T) {
	t.Parallel()
	hybrid := `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	l, err := ParseMountInfo(strings.NewReader(hybrid))
	if err != nil {
		t.Fatal(err)
	}
	if l.Mode != ModeHybrid || l.Unified != "/sys/fs/cgroup/unified" {
		t.Fatalf("layout %+v", l)
	}
	if m, ok := l.V1Controller("cpuacct"); !ok || m.Mountpoint != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Fatalf("cpuacct: %+v %v", m, ok)
	}
	if m, ok := l.V1Controller("name=systemd"); !ok || len(m.Controllers) != 1 {
		t.Fatalf("systemd: %+v %v", m, ok)
	}
	h, err := l.IOHierarchy()
	if err != nil || h != (Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}) {
		t.Fatalf("IOHierarchy = %+v %v", h, err)
	}

	v2 := "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	l, err = ParseMountInfo(strings.NewReader(v2))
	if err != nil || l.Mode != ModeV2 {
		t.Fatalf("v2: %+v %v", l, err)
	}
	if h, _ := l.IOHierarchy(); h != (Hierarchy{Version: 2, Mount: "/sys/fs/cgroup"}) {
		t.Fatalf("v2 IOHierarchy = %+v", h)
	}

	v1 := "38 31 0:35 /docker/abc /sys/fs/cgroup/blk\\040io rw - cgroup cgroup rw,blkio\n"
	l, err = ParseMountInfo(strings.NewReader(v1))
	if err != nil || l.Mode != ModeV1 || l.V1[0].Mountpoint != "/sys/fs/cgroup/blk io" || l.V1[0].Root != "/docker/abc" {
		t.Fatalf("v1: %+v %v", l, err)
	}

	// Only a named v1 hierarchy plus cgroup2: that is v2 for controllers.
	named := "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	if l, err := ParseMountInfo(strings.NewReader(named)); err != nil || l.Mode != ModeV2 {
		t.Fatalf("named+v2: %+v %v", l, err)
	}

	if _, err := ParseMountInfo(strings.NewReader("24 30 0:22 / /sys rw - sysfs sysfs rw\n")); !errors.Is(err, ErrNoCgroupMounts) {
		t.Fatalf("no cgroups: %v", err)
	}
	var pe *ParseError
	if _, err := ParseMountInfo(strings.NewReader("garbage line\n")); !errors.As(err, &pe) {
		t.Fatalf("garbage: %v", err)
	}
}

func TestHierarchyPathCannotEscape(t *testing.T) {
	t.Parallel()
	h := Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}
	for in, want := range map[string]string{
		"/docker/abc":            "/sys/fs/cgroup/blkio/docker/abc",
		"docker/abc":             "/sys/fs/cgroup/blkio/docker/abc",
		"../../../../etc/passwd": "/sys/fs/cgroup/blkio/etc/passwd",
		"/a/../../b":             "/sys/fs/cgroup/blkio/b",
		"":                       "/sys/fs/cgroup/blkio",
	} {
		got, err := h.Path(in)
		if err != nil || got != want {
			t.Errorf("Path(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := h.Path("a\x00b"); !errors.Is(err, ErrOutsideHierarchy) {
		t.Errorf("NUL accepted: %v", err)
	}
	if got, err := Within("/lxc", "../../etc"); err != nil || got != "/lxc/etc" {
		t.Errorf("Within = %q %v", got, err)
	}
	if _, err := Within("/lxc", ".."); err == nil {
		t.Error("Within(/lxc, ..) accepted: it names the parent itself")
	}
}

// TestNextField: the first field and what follows it (from its separator
// on), spaces and tabs alike.
func TestNextField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, field, rest string }{
		{"", "", ""},
		{"   ", "", ""},
		{"a", "a", ""},
		{"7:0 Read 4096", "7:0", " Read 4096"},
		{" \t 7:0\tRead", "7:0", "\tRead"},
		{"Total 42\n", "Total", " 42\n"},
		{"rbps=1 wbps=max ", "rbps=1", " wbps=max "},
	} {
		f, r := nextField([]byte(c.in))
		if string(f) != c.field || string(r) != c.rest {
			t.Errorf("nextField(%q) = %q, %q; want %q, %q", c.in, f, r, c.field, c.rest)
		}
	}
}
