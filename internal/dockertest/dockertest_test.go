package dockertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealImage builds the image, runs the load generator in it against a
// loop device mapped in with --device, and checks exit codes and logs; the
// image and the containers are gone afterwards.
func TestRealImage(t *testing.T) {
	testkit.NeedRoot(t)
	c := Client(t)
	tag := UniqueTag("dockertest")
	var ids []string
	t.Run("run", func(t *testing.T) {
		start := time.Now()
		ref := BuildImage(t, tag, Remove())
		t.Logf("BuildImage took %s", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if again := BuildImage(t, tag); again != ref {
			t.Fatalf("BuildImage again = %s, want %s", again, ref)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("cached BuildImage took %s: not cached?", d)
		}

		loop := testkit.LoopDevice(t, 16)
		ok := RunContainer(t, c, RunOptions{Image: ref, Devices: []Device{{Host: loop.Path}},
			Args: []string{"workload", "--direct", "--json", "--bytes", "3MiB", "read", loop.Path}})
		ids = append(ids, ok.ID)
		logs := ExpectExit(t, c, ok.ID, 0, time.Minute)
		var res struct {
			Bytes int64 `json:"bytes"`
		}
		if err := json.Unmarshal([]byte(logs), &res); err != nil || res.Bytes != 3<<20 {
			t.Fatalf("result %q: bytes %d, %v; want %d", logs, res.Bytes, err, 3<<20)
		}

		// Without --device the node does not exist in the container.
		bad := RunContainer(t, c, RunOptions{Image: ref, Args: []string{"workload", "--bytes", "1MiB", "read", loop.Path}})
		ids = append(ids, bad.ID)
		if logs := ExpectExit(t, c, bad.ID, 1, time.Minute); !strings.Contains(logs, "no such file") {
			t.Errorf("logs of a read of an unmapped device: %q", logs)
		}
		usage := RunContainer(t, c, RunOptions{Image: ref, Args: []string{"workload", "--bogus"}})
		ids = append(ids, usage.ID)
		ExpectExit(t, c, usage.ID, 2, time.Minute)
	})
	// The subtest's cleanups have run: containers and image are gone.
	ctx := context.Background()
	for _, id := range ids {
		if _, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("container %.12s still there after cleanup (inspect: %v)", id, err)
		}
	}
	if _, err := c.ImageInspect(ctx, tag); !cerrdefs.IsNotFound(err) {
		t.Errorf("image %s still there after cleanup (inspect: %v)", tag, err)
	}
}

func TestUniqueTag(t *testing.T) {
	a, b := UniqueTag("x"), UniqueTag("x")
	if a == b || !strings.HasPrefix(a, "ddiskqos-test:x-") {
		t.Fatalf("UniqueTag = %s, %s", a, b)
	}
}

func TestSanitize(t *testing.T) {
	if got := sanitize("TestA/b c:d"); got != "TestA_b_c_d" {
		t.Fatalf("sanitize = %q", got)
	}
}
