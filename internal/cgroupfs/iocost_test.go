package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseCostModel(t *testing.T) {
	t.Parallel()
	in := "8:16 ctrl=auto model=linear rbps=2706339840 rseqiops=89698 rrandiops=110036 wbps=1063126016 wseqiops=135560 wrandiops=130734\n\n" +
		"254:0 ctrl=user model=linear rbps=104857600 rseqiops=25600 rrandiops=6000 wbps=52428800 wseqiops=12800 wrandiops=3000 future=1\n"
	got, err := ParseCostModel([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []CostModel{
		{Dev: Dev{8, 16}, Ctrl: "auto", Model: "linear", RBps: 2706339840, RSeqIOPS: 89698, RRandIOPS: 110036, WBps: 1063126016, WSeqIOPS: 135560, WRandIOPS: 130734},
		{Dev: Dev{254, 0}, Ctrl: "user", Model: "linear", RBps: 104857600, RSeqIOPS: 25600, RRandIOPS: 6000, WBps: 52428800, WSeqIOPS: 12800, WRandIOPS: 3000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if m, ok := FindCostModel(got, Dev{254, 0}); !ok || m.RRandIOPS != 6000 {
		t.Fatalf("FindCostModel 254:0 = %+v, %v", m, ok)
	}
	if _, ok := FindCostModel(got, Dev{1, 1}); ok {
		t.Fatal("FindCostModel found a device that is not there")
	}
	for _, bad := range []string{
		"8:16 ctrl=user rbps=-1",
		"8:16 ctrl=user rbps=1e9",
		"sda ctrl=auto",
		"8:16 ctrl",
		"8: rbps=1",
	} {
		_, err := ParseCostModel([]byte(bad))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "io.cost.model" || pe.Line != 1 {
			t.Errorf("ParseCostModel(%q) = %v, want a *ParseError of io.cost.model line 1", bad, err)
		}
	}
}

func TestParseCostQoS(t *testing.T) {
	t.Parallel()
	in := "8:16 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=90.50 wlat=20000 min=50.00 max=150.00\n" +
		"254:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n"
	got, err := ParseCostQoS([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []CostQoS{
		{Dev: Dev{8, 16}, Enable: true, Ctrl: "user", RPct: 95, RLat: 10000, WPct: 90.5, WLat: 20000, Min: 50, Max: 150},
		{Dev: Dev{254, 0}, Enable: false, Ctrl: "auto", RLat: 250000, WLat: 250000, Min: 1, Max: 10000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"8:16 enable=2",
		"8:16 enable=1 rpct=101",
		"8:16 enable=1 rlat=-5",
		"8:16 enable=1 min=-1",
		"8:16 enable=1 max=NaN",
		"x:16 enable=1",
		"8:16 enable",
	} {
		_, err := ParseCostQoS([]byte(bad))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "io.cost.qos" {
			t.Errorf("ParseCostQoS(%q) = %v, want a *ParseError of io.cost.qos", bad, err)
		}
	}
}

func TestCostLinesRoundTrip(t *testing.T) {
	t.Parallel()
	m := CostModel{Dev: Dev{254, 16}, Ctrl: "user", Model: "linear", RBps: 1, RSeqIOPS: 2, RRandIOPS: 3, WBps: 4, WSeqIOPS: 5, WRandIOPS: 6}
	back, err := ParseCostModel([]byte(m.Line()))
	if err != nil || len(back) != 1 || back[0] != m {
		t.Fatalf("model %q parsed back as %+v, %v", m.Line(), back, err)
	}
	if got := (CostModel{Dev: Dev{8, 0}, Ctrl: "auto", RBps: 9}).Line(); got != "8:0 ctrl=auto" {
		t.Errorf("auto model line = %q", got)
	}
	q := CostQoS{Dev: Dev{8, 0}, Enable: true, Ctrl: "user", RPct: 95, RLat: 1500, WPct: 95, WLat: 3000, Min: 25, Max: 100}
	qb, err := ParseCostQoS([]byte(q.Line()))
	if err != nil || len(qb) != 1 || qb[0] != q {
		t.Fatalf("qos %q parsed back as %+v, %v", q.Line(), qb, err)
	}
	if got := (CostQoS{Dev: Dev{8, 0}, Ctrl: "auto", RLat: 7}).Line(); got != "8:0 enable=0 ctrl=auto" {
		t.Errorf("auto qos line = %q", got)
	}
}

func TestCostKnobsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := Hierarchy{Version: 2, Mount: dir}
	if _, err := h.ReadCostModel(); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("no io.cost.model: err %v, want ErrNotAvailable", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "io.cost.qos"), []byte("8:0 enable=1 ctrl=auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, err := h.ReadCostQoS()
	if err != nil || len(qs) != 1 || !qs[0].Enable {
		t.Fatalf("ReadCostQoS = %+v, %v", qs, err)
	}
	if err := h.WriteCostQoS("8:0 enable=0 ctrl=auto"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "io.cost.qos")); string(b) != "8:0 enable=0 ctrl=auto" {
		t.Fatalf("io.cost.qos after write: %q", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "io.cost.model"), []byte("8:0 ctrl=auto rbps=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadCostModel(); err == nil || !strings.Contains(err.Error(), "io.cost.model") {
		t.Fatalf("malformed io.cost.model: err %v, want one naming the file", err)
	}
}

func FuzzParseCostModel(f *testing.F) {
	f.Add([]byte("8:16 ctrl=auto model=linear rbps=2706339840 rseqiops=89698 rrandiops=110036 wbps=1063126016 wseqiops=135560 wrandiops=130734\n"))
	f.Add([]byte("8:0 ctrl=user\n\n254:0 rbps="))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseCostModel(data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, m := range ms {
			m.Ctrl = "user"
			again, err := ParseCostModel([]byte(m.Line()))
			if err != nil || len(again) != 1 {
				t.Fatalf("reparse of %q: %+v, %v", m.Line(), again, err)
			}
			m.Model = "linear"
			if again[0] != m {
				t.Fatalf("round trip: %+v != %+v", again[0], m)
			}
		}
	})
}

func FuzzParseCostQoS(f *testing.F) {
	f.Add([]byte("8:16 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=20000 min=50.00 max=150.00\n"))
	f.Add([]byte("254:0 enable=0\n\n8:0 enable=1 ctrl=auto"))
	f.Add([]byte("8:16 enable=2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := ParseCostQoS(data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, q := range qs {
			q.Ctrl = "user"
			again, err := ParseCostQoS([]byte(q.Line()))
			if err != nil || len(again) != 1 {
				t.Fatalf("reparse of %q: %+v, %v", q.Line(), again, err)
			}
			// Line prints two decimals, as the kernel does.
			if a := again[0]; a.Dev != q.Dev || a.Enable != q.Enable || a.RLat != q.RLat || a.WLat != q.WLat {
				t.Fatalf("round trip: %+v != %+v", a, q)
			}
		}
	})
}
