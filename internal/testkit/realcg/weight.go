package realcg

import (
	"strconv"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Weight reads cgroup cg's per-device weight on dev through the weight
// mechanism n (internal/mech: its file, its own scale); false when the
// cgroup has none for the device. A read or parse error fails the test.
func Weight(t testing.TB, h cgroupfs.Hierarchy, n mech.Name, dev cgroupfs.Dev, cg string) (uint64, bool) {
	t.Helper()
	v, err := mech.Read(h, n, dev, cg)
	if err != nil {
		t.Fatalf("read %s of %s on %s: %v", n, cg, dev, err)
	}
	if v == "" {
		return 0, false
	}
	w, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s of %s on %s: %q is not a weight", n, cg, dev, v)
	}
	return w, true
}

// Native is the weight w (10..1000) on the weight mechanism n's own scale
// (iocost's divides by 10).
func Native(t testing.TB, n mech.Name, w cgroupfs.Weight) uint64 {
	t.Helper()
	v, err := mech.WeightValue(n, w)
	if err != nil {
		t.Fatal(err)
	}
	u, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
