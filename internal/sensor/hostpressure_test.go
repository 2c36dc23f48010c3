package sensor

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHostPressure: the file is read at every Read while it is open; one
// that could not be opened is not tried again (PSI does not come on while
// the host runs); one that stops reading gives nil.
func TestHostPressure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "io")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := HostPressure{Path: p}
	if got := missing.Read(); got != nil {
		t.Fatalf("missing file: %+v, want nil", got)
	}
	write("some avg10=1.00 avg60=0.50 avg300=0.10 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n")
	if got := missing.Read(); got != nil {
		t.Errorf("a file missing at the first Read, there at the second: %+v, want nil (not tried again)", got)
	}
	h := HostPressure{Path: p}
	defer h.Close()
	if got := h.Read(); got == nil || got.SomeTotal != 1000 || got.FullTotal != 500 || got.SomeAvg10 != 1 {
		t.Fatalf("first read %+v", got)
	}
	write("some avg10=2.00 avg60=0.50 avg300=0.10 total=3000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1500\n")
	if got := h.Read(); got == nil || got.SomeTotal != 3000 {
		t.Fatalf("after the file changed %+v, want some total 3000", got)
	}
	write("some nonsense\n")
	if got := h.Read(); got != nil {
		t.Errorf("unparsable file: %+v, want nil", got)
	}
	h.Close()
	h.Close()
}
