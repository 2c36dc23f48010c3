package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestMissingToolError(t *testing.T) {
	t.Parallel()
	err := error(&MissingToolError{Tool: "mkfs.ext4", Package: PkgE2fsprogs})
	if !strings.Contains(err.Error(), "apt-get install e2fsprogs") {
		t.Errorf("error %q does not say what to install", err)
	}
}

// TestRealVolume: a volume is created, filled, its scheduler changed, and
// Close leaves no loop device, mount, directory or changed scheduler.
func TestRealVolume(t *testing.T) {
	if testkit.InVM() {
		t.Skip("loop volumes are tested on the host")
	}
	testkit.NeedRoot(t)
	if err := CheckTools(); err != nil {
		var mt *MissingToolError
		testkit.Need(t, !errors.As(err, &mt), "%v", err)
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := Create(ctx, Options{Size: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			v.Close()
		}
	})
	p, err := v.WriteFile(ctx, "../../f", 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, v.Mount+"/") {
		t.Errorf("file %s written outside the mount %s", p, v.Mount)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 3<<20 {
		t.Fatalf("stat %s: %v %v", p, fi, err)
	}
	def, offered, err := v.Scheduler()
	if err != nil || def != v.DefaultScheduler {
		t.Fatalf("scheduler %q (default %q): %v", def, v.DefaultScheduler, err)
	}
	if strings.Contains(strings.Join(offered, " "), "bfq") {
		if err := v.SetScheduler("bfq"); err != nil {
			t.Fatal(err)
		}
		if cur, _, _ := v.Scheduler(); cur != "bfq" {
			t.Errorf("scheduler %q after SetScheduler(bfq)", cur)
		}
	}
	if err := v.SetScheduler("no-such"); err == nil {
		t.Error("SetScheduler(no-such): want an error")
	}
	dev, backing := v.Path, v.Backing
	closed = true
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	out, _ := exec.Command("losetup", "-a").CombinedOutput()
	if strings.Contains(string(out), backing) {
		t.Errorf("%s still attached after Close:\n%s", dev, out)
	}
	if _, err := os.Stat(backing); !os.IsNotExist(err) {
		t.Errorf("backing file %s still there: %v", backing, err)
	}
}
