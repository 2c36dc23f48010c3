package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Lookup resolves a container's cgroup as Run does (from its process, else
// from the configuration), and names what it could not find.
func TestLookup(t *testing.T) {
	f := newFakeEngine(t, DriverCgroupfs)
	procfs := t.TempDir()
	writeProc(t, procfs, 4242, "12:blkio:/docker/aaaa1111\n0::/\n")
	f.put(fakeContainer{id: "aaaa1111", name: "web", pid: 4242})
	f.put(fakeContainer{id: "bbbb2222", name: "db", pid: 99, parent: "/custom"}) // no /proc entry
	s, err := New(Options{Engine: f.client(), Layout: hybridLayout, ProcFS: procfs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wl, err := s.Lookup(ctx, "aaaa1111")
	if err != nil {
		t.Fatal(err)
	}
	if wl.Name != "web" || wl.Cgroup != "/docker/aaaa1111" || wl.Pid != 4242 {
		t.Errorf("Lookup(aaaa1111) = %+v", wl)
	}
	wl, err = s.Lookup(ctx, "bbbb2222")
	if err != nil {
		t.Fatal(err)
	}
	if wl.Cgroup != "/custom/bbbb2222" {
		t.Errorf("from config: cgroup %q, want /custom/bbbb2222", wl.Cgroup)
	}
	_, err = s.Lookup(ctx, "nosuch")
	if !errors.Is(err, ErrNoContainer) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("Lookup(nosuch) = %v, want ErrNoContainer naming it", err)
	}
	if _, err := s.Lookup(ctx, ""); !errors.Is(err, ErrNoContainer) {
		t.Errorf("Lookup(\"\") = %v, want ErrNoContainer", err)
	}
}
