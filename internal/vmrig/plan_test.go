package vmrig

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanShares(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		prog     string
		module   string
		writable []string
		want     []Share
		wantErr  string
	}{
		{
			name: "go test", prog: "/tmp/go-build1/b001", module: "/work/main",
			want: []Share{{Dir: "/work/main"}, {Dir: "/tmp/go-build1/b001", Writable: true}},
		},
		{
			name: "program inside the module", prog: "/work/main/bin", module: "/work/main",
			want: []Share{{Dir: "/work/main"}, {Dir: "/work/main/bin", Writable: true}},
		},
		{
			name: "module inside the program dir", prog: "/work", module: "/work/main",
			want: []Share{{Dir: "/work", Writable: true}},
		},
		{
			name: "program in /usr stays read-only", prog: "/usr/bin", module: "/src/x",
			want: []Share{{Dir: "/src/x"}},
		},
		{
			name: "coverage dir", prog: "/tmp/b1", module: "/src/x", writable: []string{"/tmp/cov/", "/tmp/b1/cov"},
			want: []Share{{Dir: "/src/x"}, {Dir: "/tmp/b1", Writable: true}, {Dir: "/tmp/cov", Writable: true}},
		},
		{name: "root", prog: "/", module: "/src/x", wantErr: "share /: cannot be shared"},
		{name: "proc", prog: "/proc/self", module: "/src/x", wantErr: "share /proc/self: cannot be shared"},
		{name: "relative", prog: "bin", module: "/src/x", wantErr: `share "bin": not an absolute path`},
		{name: "blank", prog: "/tmp/a b", module: "/src/x", wantErr: "blanks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := PlanShares(tc.prog, tc.module, tc.writable...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestJobScript(t *testing.T) {
	t.Parallel()
	got := JobScript(
		[]Share{{Dir: "/work/main"}, {Dir: "/tmp/b1", Writable: true}},
		"/work/main/pkg",
		[]string{"DDISKQOS_X=it's", "GOTRACEBACK=all", "BAD-NAME=1", "NOEQUALS"},
		[]string{"/tmp/b1/pkg.test", "-test.run=V2$", ""},
	)
	want := `# written by vmexec, read by test/vm/init
VMEXEC_SHARES='vmexec.s0 /work/main ro
vmexec.s1 /tmp/b1 rw'
VMEXEC_CWD='/work/main/pkg'
export DDISKQOS_X='it'\''s'
export GOTRACEBACK='all'
set -- '/tmp/b1/pkg.test' '-test.run=V2$' ''
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestPassEnv(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"DDISKQOS_VM_DISK": true, "GOTRACEBACK": true, "GOCOVERDIR": true, "GODEBUG": true,
		"GOPATH": false, "HOME": false, "PATH": false, "DDISKQOS": false,
	} {
		if got := PassEnv(name); got != want {
			t.Errorf("PassEnv(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestQEMUArgs(t *testing.T) {
	t.Parallel()
	c := Config{Kernel: "/k", Initrd: "/i", BIOS: "/q.rom", Mem: "512M", SMP: 2, DiskBPS: 4 << 20}
	f := Files{Ctl: "/t/ctl", Disk: "/t/a,b.img", Stdout: "/t/o", Stderr: "/t/e", Status: "/t/s", Console: "/t/c"}
	args := QEMUArgs(c, f, []Share{{Dir: "/work/main"}, {Dir: "/tmp/b1", Writable: true}})
	line := strings.Join(args, " ")
	for _, want := range []string{
		"-accel tcg,thread=multi", "-no-reboot", "-bios /q.rom", "-kernel /k", "-initrd /i", "-m 512M", "-smp 2",
		"-drive file=/t/a,,b.img,format=raw,if=none,id=disk,cache=unsafe,throttling.bps-total=4194304",
		"virtserialport,chardev=status,name=ddiskqos.status",
		"-fsdev local,id=usr,path=/usr,security_model=none,readonly=on",
		"-fsdev local,id=s0,path=/work/main,security_model=none,readonly=on -device virtio-9p-pci,fsdev=s0,mount_tag=vmexec.s0",
		"-fsdev local,id=s1,path=/tmp/b1,security_model=none -device virtio-9p-pci,fsdev=s1,mount_tag=vmexec.s1",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("qemu args lack %q:\n%s", want, line)
		}
	}
	c.Burst = BurstDisk{Size: 1 << 20, IOPS: 40, IOPSMax: 400, MaxLength: 40}
	f.Burst = "/t/burst.img"
	line = strings.Join(QEMUArgs(c, f, nil), " ")
	if want := "-drive file=/t/burst.img,format=raw,if=none,id=burst,cache=unsafe,throttling.iops-total=40,throttling.iops-total-max=400,throttling.iops-total-max-length=40 -device virtio-blk-pci,drive=burst,serial=ddiskqos-burst"; !strings.Contains(line, want) {
		t.Errorf("qemu args lack the burst disk %q:\n%s", want, line)
	}
	c.Burst = BurstDisk{}
	if strings.Contains(strings.Join(QEMUArgs(c, f, nil), " "), "burst") {
		t.Error("a zero Burst still attaches a burst disk")
	}
	c.DiskBPS = 0
	if slices.ContainsFunc(QEMUArgs(c, f, nil), func(a string) bool { return strings.Contains(a, "throttling") }) {
		t.Error("DiskBPS 0 still throttles")
	}
}

func TestStatusReader(t *testing.T) {
	t.Parallel()
	var s statusReader
	for _, chunk := range []string{"sta", "rt\nexi", "t 3", "\n"} {
		s.Write([]byte(chunk))
	}
	if !s.started || !s.exited || s.code != 3 || s.errMsg != "" {
		t.Errorf("got %+v", s)
	}
	var e statusReader
	e.Write([]byte("error mount 9p vmexec.s0 at /x failed\n"))
	if e.started || e.exited || e.errMsg != "mount 9p vmexec.s0 at /x failed" {
		t.Errorf("got %+v", e)
	}
	var b statusReader
	b.Write([]byte("exit x\n"))
	if b.exited || b.errMsg == "" {
		t.Errorf("bad exit line accepted: %+v", b)
	}
}

func TestModuleRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pkg := filepath.Join(root, "internal", "x")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ModuleRoot(pkg); got != pkg {
		t.Errorf("without go.mod: ModuleRoot = %s, want %s", got, pkg)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ModuleRoot(pkg); got != root {
		t.Errorf("ModuleRoot = %s, want %s", got, root)
	}
}

func TestCheckAssets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	err := CheckAssets(Config{QEMU: filepath.Join(dir, "qemu"), Kernel: filepath.Join(dir, "kernel"), Initrd: filepath.Join(dir, "initramfs")})
	if err == nil {
		t.Fatal("no error for missing assets")
	}
	for _, want := range []string{"qemu: missing; run test/vm/assets.sh", "kernel: missing", "initramfs: missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestRunBootTimeout: a VM that never starts the program (here a "qemu"
// that only sleeps) is killed after BootTimeout and booted once more; the
// second hang is an ErrBootTimeout, and no process is left.
func TestRunBootTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	qemu := filepath.Join(dir, "qemu")
	script := "#!/bin/sh\necho $$ >> " + starts + "\nexec sleep 600\n"
	if err := os.WriteFile(qemu, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"kernel", "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	c := Config{QEMU: qemu, Kernel: filepath.Join(dir, "kernel"), Initrd: filepath.Join(dir, "initrd"),
		DiskSize: 1 << 20, BootTimeout: 300 * time.Millisecond, Timeout: time.Minute, TempDir: dir, Log: &log}
	t0 := time.Now()
	_, err := Run(context.Background(), c, Job{Path: prog, Dir: dir, Stdout: io.Discard, Stderr: io.Discard})
	if !errors.Is(err, ErrBootTimeout) {
		t.Fatalf("err %v, want ErrBootTimeout", err)
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("took %v: the boot timeout of 300ms was not applied", took)
	}
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(b))
	if len(pids) != 2 {
		t.Fatalf("qemu started %d times, want 2 (one boot more)", len(pids))
	}
	for _, p := range pids {
		if _, err := os.Stat("/proc/" + p); err == nil {
			t.Errorf("qemu %s still running", p)
		}
	}
	if !strings.Contains(log.String(), "booting it once more") {
		t.Errorf("the log does not say it booted once more: %q", log.String())
	}
}
