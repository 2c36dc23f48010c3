package realcg

// Workloads in the rig's cgroups: processes started there, and what the
// kernel reads back of a cgroup's knobs.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// V1 is New for a test of the host's cgroup v1 (blkio and a loop device):
// skipped inside the test VM, which mounts cgroup v2 only.
func V1(t testing.TB, o Options) *Rig {
	t.Helper()
	testkit.HostOnly(t)
	return New(t, o)
}

// V2 is New for a test of cgroup v2 (the VM's disk): skipped outside the
// test VM (make test-v2 runs it there).
func V2(t testing.TB, o Options) *Rig {
	t.Helper()
	testkit.VMOnly(t)
	return New(t, o)
}

// Limits reads the throttle limits of cgroup cg on the rig's disk.
func (r *Rig) Limits(t testing.TB, cg string) cgroupfs.Limits {
	t.Helper()
	l, err := r.H.ReadLimits(cg, r.Dev)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Start starts a `ddiskqos workload` process (the test binary, whose
// TestMain runs workload.MaybeRunFromEnv) reading the rig's disk with
// O_DIRECT in cgroup cg, and lets it go once it is there; it is killed
// when ctx ends.
func (r *Rig) Start(t testing.TB, ctx context.Context, cg string, args ...string) *workload.Proc {
	t.Helper()
	args = append([]string{"--wait-stdin", "--json", "--direct"}, append(args, "read", r.Disk.Path)...)
	p, err := workload.Start(ctx, os.Args[0], []string{workload.EnvMain + "=1"}, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.H.AddProcess(cg, p.Pid()); err != nil {
		t.Fatal(err)
	}
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Stream keeps a sequential O_DIRECT reader of 1 MiB requests at iodepth
// on the first half of the disk in cgroup cg until ctx ends.
func (r *Rig) Stream(t testing.TB, ctx context.Context, cg string, iodepth int) {
	t.Helper()
	p := r.Start(t, ctx, cg, "--loop", "--bs", "1MiB", "--iodepth", strconv.Itoa(iodepth), "--span", strconv.FormatInt(r.Disk.Size/2, 10))
	t.Cleanup(func() { p.Kill(); p.Wait() })
}

// Victim makes one 4 KiB O_DIRECT read in cgroup cg at a random offset in
// the second half of the disk and returns its result.
func (r *Rig) Victim(t testing.TB, cg string) workload.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	off := r.Disk.Size/2 + rand.Int64N(r.Disk.Size/2/4096-1)*4096
	p := r.Start(t, ctx, cg, "--bs", "4k", "--bytes", "4k", "--offset", strconv.FormatInt(off, 10))
	res, err := p.Wait()
	if err != nil {
		t.Fatalf("victim read in %s: %v", cg, err)
	}
	if res.Bytes != 4096 {
		t.Fatalf("victim read %d bytes, want 4096", res.Bytes)
	}
	return res
}

// InCgroup starts dd with the given arguments inside cgroup rel: a shell
// moves itself into the cgroup and then becomes dd, so every request of dd
// is charged there. It is killed when ctx or the test ends.
func (r *Rig) InCgroup(t testing.TB, ctx context.Context, rel string, ddArgs string) *exec.Cmd {
	t.Helper()
	return r.sh(t, ctx, rel, "exec dd "+ddArgs+" of=/dev/null status=none")
}

// ShIn runs the shell script in cgroup rel until ctx ends (or the script
// does): the shell moves itself into the cgroup first, so every child it
// starts is charged there.
func (r *Rig) ShIn(t testing.TB, ctx context.Context, rel, script string) {
	t.Helper()
	r.sh(t, ctx, rel, script)
}

// sh starts script in a shell that moves itself into cgroup rel first; it
// is killed when ctx or the test ends (a Kill or Wait after the test's own
// Wait does nothing).
func (r *Rig) sh(t testing.TB, ctx context.Context, rel, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && %s", r.Dir(t, rel), script))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// StreamIn keeps a 1 MiB O_DIRECT reader of the whole disk running in
// cgroup rel until ctx ends (one dd reads a small test loop device in a
// few milliseconds: a stream is dd over and over).
func (r *Rig) StreamIn(t testing.TB, ctx context.Context, rel string) {
	t.Helper()
	r.ShIn(t, ctx, rel, fmt.Sprintf("while :; do dd if=/dev/%s of=/dev/null bs=1M iflag=direct status=none || exit 1; done", r.Disk.Name))
}

// LightIn keeps a light reader running in cgroup rel until ctx ends: one
// 4 KiB O_DIRECT read at block skip, then a 10 ms pause, over and over
// (under 100 reads/s, ≤ 400 KB/s: a web service's or a health check's
// pace).
func (r *Rig) LightIn(t testing.TB, ctx context.Context, rel string, skip int) {
	t.Helper()
	r.ShIn(t, ctx, rel, fmt.Sprintf("while :; do dd if=/dev/%s of=/dev/null bs=4k count=1 skip=%d iflag=direct status=none || exit 1; sleep 0.01; done",
		r.Disk.Name, skip))
}
