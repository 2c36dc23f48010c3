package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/vmrig"
)

// report mirrors testdata/probe's Report.
type report struct {
	Cwd             string
	InVM            string
	Disk            string
	Token           string
	TmpDir          string
	TmpWritable     bool
	Controllers     string
	SubtreeControl  string
	PressureIO      bool
	DiskIsBlock     bool
	SchedulerBefore string
	SchedulerAfter  string
	Errors          []string
}

// TestVM boots the real VM: it needs qemu and test/vm/assets.sh's kernel and
// initramfs. Without them it fails, so that CI cannot skip it unnoticed,
// unless DDISKQOS_ALLOW_SKIP_VM=1.
func TestVM(t *testing.T) {
	if os.Getenv("DDISKQOS_IN_VM") == "1" {
		t.Skip("already inside the test VM: qemu does not nest here")
	}
	def, err := vmrig.DefaultConfig()
	if err == nil {
		err = vmrig.CheckAssets(def)
	}
	if err != nil {
		if os.Getenv("DDISKQOS_ALLOW_SKIP_VM") == "1" {
			t.Skipf("DDISKQOS_ALLOW_SKIP_VM=1 and the VM assets are missing:\n%v", err)
		}
		t.Fatalf("VM assets missing (run test/vm/assets.sh, or set DDISKQOS_ALLOW_SKIP_VM=1 to skip):\n%v", err)
	}

	bin := t.TempDir()
	vmexec := filepath.Join(bin, "vmexec")
	probe := filepath.Join(bin, "probe")
	goBuild(t, vmexec, ".")
	goBuild(t, probe, "./testdata/probe")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// vmexec's own files go here; it must leave nothing behind.
	hostTmp := t.TempDir()

	run := func(t *testing.T, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(vmexec, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		cmd.Env = append(os.Environ(), "TMPDIR="+hostTmp, "DDISKQOS_PROBE_TOKEN=tok'en", "GOTRACEBACK=all")
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("vmexec %v: %v", args, err)
		}
		if left, _ := os.ReadDir(hostTmp); len(left) > 0 {
			t.Errorf("vmexec left %d files in %s: %v", len(left), hostTmp, left[0].Name())
		}
		if pids := qemuUsing(hostTmp); len(pids) > 0 {
			t.Errorf("qemu processes still running: %v", pids)
		}
		return o.String(), e.String(), code
	}

	t.Run("report", func(t *testing.T) {
		stdout, stderr, code := run(t, "-v", probe, "report")
		if code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "probe report done") || !strings.Contains(stderr, "vmexec: boot to program start") {
			t.Errorf("stderr lacks the probe's line or the -v timing:\n%s", stderr)
		}
		var r report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("stdout is no report: %v\n%s", err, stdout)
		}
		t.Logf("%+v", r)
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"cwd", r.Cwd, cwd},
			{"DDISKQOS_IN_VM", r.InVM, "1"},
			{"DDISKQOS_VM_DISK", r.Disk, "/dev/vda"},
			{"passed-through DDISKQOS_PROBE_TOKEN", r.Token, "tok'en"},
			{"os.TempDir", r.TmpDir, "/tmp"},
			{"TMPDIR writable", r.TmpWritable, true},
			{"/proc/pressure/io exists", r.PressureIO, true},
			{"/dev/vda is a block device", r.DiskIsBlock, true},
		} {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
			}
		}
		if !strings.Contains(" "+r.Controllers+" ", " io ") {
			t.Errorf("cgroup.controllers = %q, want io in it", r.Controllers)
		}
		if !strings.Contains(" "+r.SubtreeControl+" ", " io ") {
			t.Errorf("root cgroup.subtree_control = %q, want io enabled", r.SubtreeControl)
		}
		if !strings.Contains(r.SchedulerBefore, "bfq") || !strings.Contains(r.SchedulerAfter, "[bfq]") {
			t.Errorf("scheduler of /dev/vda: before %q, after selecting bfq %q", r.SchedulerBefore, r.SchedulerAfter)
		}
		if len(r.Errors) > 0 {
			t.Errorf("probe errors: %v", r.Errors)
		}
	})

	for _, want := range []int{0, 3} {
		t.Run("exit "+string(rune('0'+want)), func(t *testing.T) {
			stdout, stderr, code := run(t, probe, "exit", string(rune('0'+want)))
			if code != want {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, want, stderr)
			}
			if stdout != "probe stdout\n" || stderr != "probe stderr\n" {
				t.Errorf("stdout %q, stderr %q; want the probe's lines alone", stdout, stderr)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		_, stderr, code := run(t, "-timeout", "1s", probe, "sleep", "1h")
		if code != 124 || !strings.Contains(stderr, "vmexec: vm timed out after 1s") {
			t.Errorf("exit code %d, want 124 and a timeout message; stderr:\n%s", code, stderr)
		}
	})

	t.Run("missing kernel", func(t *testing.T) {
		missing := filepath.Join(hostTmp, "no-kernel")
		_, stderr, code := run(t, "-kernel", missing, probe, "exit", "0")
		if code != 125 || !strings.Contains(stderr, missing+": missing; run test/vm/assets.sh") {
			t.Errorf("exit code %d, want 125 and a message naming %s; stderr:\n%s", code, missing, stderr)
		}
	})
}

func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// qemuUsing lists the pids of processes whose command line mentions dir.
func qemuUsing(dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(dir)) && bytes.Contains(b, []byte("qemu")) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
