// Package dockertest is test support for code that runs against the real
// Docker engine of the machine: a client that skips (or, under
// DDISKQOS_REQUIRE_REAL=1, fails) when the engine cannot be reached, a
// local image holding the ddiskqos binary, and containers that are removed
// again when the test ends, also when it fails.
//
// The image is built without a registry: the ddiskqos binary is compiled
// statically (CGO_ENABLED=0) and imported as the only file of an image whose
// entrypoint it is — the equivalent of
//
//	tar -c ddiskqos | docker import --change 'ENTRYPOINT ["/ddiskqos"]' - TAG
//
// Importing takes about 0.15 s on engine 20.10; "docker build" of the same
// FROM scratch Dockerfile with the legacy builder takes about 1.3 s, so
// import it is. Containers run the binary's subcommands, mostly the load
// generator: Args: []string{"workload", "--direct", "--bytes", "3MiB",
// "read", "/dev/loop0"}.
package dockertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// Entrypoint is where the binary lives in the image.
const Entrypoint = containers.Entrypoint

// LabelTest is set on every container RunContainer starts, to the name of
// the test that started it, so a leftover can be traced to its test.
const LabelTest = "ddiskqos.test"

// Client returns a client of the engine named by the environment
// (DOCKER_HOST, default the unix socket) that negotiates the API version,
// closed when the test ends. It skips the test — or fails it, under
// DDISKQOS_REQUIRE_REAL=1 — when the engine does not answer a ping.
func Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv)
	testkit.Need(t, err == nil, "docker client: %v", err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	testkit.Need(t, err == nil, "docker engine not reachable at %s: %v", c.DaemonHost(), err)
	return c
}

// binary is the static ddiskqos binary, built once per test process.
var binary struct {
	once sync.Once
	data []byte
	took time.Duration
	err  error
}

// images are the tags imported by this process, each once.
var images struct {
	mu   sync.Mutex
	done map[string]bool
}

// ImageOption changes what BuildImage does.
type ImageOption func(*imageOptions)

type imageOptions struct{ remove bool }

// Remove makes BuildImage remove the image when the test ends (and forget
// it, so a later BuildImage of the same tag imports it again). Give such an
// image a tag of its own (UniqueTag): another test using the same tag would
// lose it.
func Remove() ImageOption { return func(o *imageOptions) { o.remove = true } }

// UniqueTag returns an image reference no other test process uses:
// "ddiskqos-test:<name>-<pid>-<n>".
func UniqueTag(name string) string {
	return fmt.Sprintf("ddiskqos-test:%s-%d-%d", name, os.Getpid(), uniq.Add(1))
}

var uniq atomic.Int64

// BuildImage makes sure the local image tag holds the ddiskqos binary of
// this source tree as its entrypoint, and returns tag. The binary is
// compiled once per test process (it takes seconds with a cold build cache)
// and each tag is imported once per process. The image stays after the test
// unless Remove is given.
func BuildImage(t testing.TB, tag string, opts ...ImageOption) string {
	t.Helper()
	var o imageOptions
	for _, f := range opts {
		f(&o)
	}
	c := Client(t)
	bin := Binary(t)

	images.mu.Lock()
	defer images.mu.Unlock()
	if !images.done[tag] {
		start := time.Now()
		if err := importImage(c, tag, bin); err != nil {
			t.Fatal(err)
		}
		t.Logf("imported image %s in %s (ddiskqos binary of %d bytes built in %s, once per test process)",
			tag, time.Since(start).Round(time.Millisecond), len(bin), BuildTime().Round(time.Millisecond))
		if images.done == nil {
			images.done = map[string]bool{}
		}
		images.done[tag] = true
	}
	if o.remove {
		t.Cleanup(func() {
			images.mu.Lock()
			delete(images.done, tag)
			images.mu.Unlock()
			_, err := c.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove image %s: %v", tag, err)
			}
		})
	}
	return tag
}

// Binary returns the ddiskqos binary of this source tree, built statically
// once per test process. It fails the test when the go toolchain is missing
// (under DDISKQOS_REQUIRE_REAL=1) or skips it.
func Binary(t testing.TB) []byte {
	t.Helper()
	binary.once.Do(func() {
		start := time.Now()
		binary.data, binary.err = buildBinary()
		binary.took = time.Since(start)
	})
	if binary.err != nil {
		if _, ok := errors.AsType[*missingTool](binary.err); ok {
			testkit.Need(t, false, "%v", binary.err)
		}
		t.Fatal(binary.err)
	}
	return binary.data
}

// BuildTime is how long building the binary took, 0 before Binary.
func BuildTime() time.Duration { return binary.took }

type missingTool struct{ err error }

func (e *missingTool) Error() string {
	return "go toolchain not found (to build the test image): " + e.err.Error()
}

// buildBinary builds the static binary of this source tree the way the
// paper benchmark does (internal/bench/containers).
func buildBinary() ([]byte, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, &missingTool{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := containers.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	return containers.BuildStatic(ctx, root)
}

// importImage imports a one-file image holding bin as its entrypoint.
func importImage(c *client.Client, tag string, bin []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return containers.ImportImage(ctx, c, tag, bin)
}

// Device maps a host device node into a container.
type Device struct {
	Host      string // e.g. /dev/loop3
	Container string // "" means the same path as on the host
}

// RunOptions describe a container for RunContainer.
type RunOptions struct {
	Image string
	// Name is the container's name; "" makes one from the test's name.
	Name string
	// Args follow the entrypoint, e.g. {"workload", "--bytes", "1MiB", ...}.
	Args []string
	// Devices are mapped in with permissions "rwm" (docker run --device).
	Devices []Device
	// Labels are added to LabelTest.
	Labels map[string]string
	// CgroupParent is docker run --cgroup-parent.
	CgroupParent string
	// BlkioWeight is docker run --blkio-weight; 0 leaves it unset.
	BlkioWeight uint16
	// NetworkDisabled gives the container no network namespace of its
	// own (it shares the engine's runtime's): dockerd then does not
	// re-execute itself to make one and to hand it over (the
	// libnetwork-setkey hook), each several seconds of CPU under emulation.
	NetworkDisabled bool
}

// Container is a container started by RunContainer.
type Container struct {
	ID   string
	Name string
}

// RunContainer creates and starts a container (network none) and removes
// it, forcibly, when the test ends — also when the test fails, and also
// when it fails between creating and starting.
func RunContainer(t testing.TB, c *client.Client, o RunOptions) Container {
	t.Helper()
	return RunContainers(t, c, o)[0]
}

// RunContainers is RunContainer for several containers: it creates them
// one after the other, then starts them all at once (a start is mostly
// the shim's and runc's processes starting, which on a slow machine take
// seconds each: in parallel they overlap).
func RunContainers(t testing.TB, c *client.Client, opts ...RunOptions) []Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout())
	defer cancel()
	out := make([]Container, len(opts))
	for i, o := range opts {
		out[i] = createContainer(ctx, t, c, o)
	}
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i, ct := range out {
		wg.Go(func() {
			if _, err := c.ContainerStart(ctx, ct.ID, client.ContainerStartOptions{}); err != nil {
				errs[i] = fmt.Errorf("start container %s: %w", ct.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// createContainer creates the container of o and removes it when the test
// ends.
func createContainer(ctx context.Context, t testing.TB, c *client.Client, o RunOptions) Container {
	t.Helper()
	name := o.Name
	if name == "" {
		name = fmt.Sprintf("ddiskqos-test-%s-%d-%d", sanitize(t.Name()), os.Getpid(), uniq.Add(1))
	}
	labels := map[string]string{LabelTest: t.Name()}
	for k, v := range o.Labels {
		labels[k] = v
	}
	var devs []container.DeviceMapping
	for _, d := range o.Devices {
		in := d.Container
		if in == "" {
			in = d.Host
		}
		devs = append(devs, container.DeviceMapping{PathOnHost: d.Host, PathInContainer: in, CgroupPermissions: "rwm"})
	}
	cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{Image: o.Image, Cmd: o.Args, Labels: labels, NetworkDisabled: o.NetworkDisabled},
		HostConfig: &container.HostConfig{NetworkMode: "none", Resources: container.Resources{
			CgroupParent: o.CgroupParent, Devices: devs, BlkioWeight: o.BlkioWeight}}})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	for _, w := range cr.Warnings {
		t.Logf("create container %s: engine warns: %s", name, w)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.ContainerRemove(ctx, cr.ID, client.ContainerRemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", name, err)
		}
	})
	return Container{ID: cr.ID, Name: name}
}

// sanitize makes a test name usable in a container name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// RemoveContainer removes a container forcibly now (it would be at cleanup) and
// fails the test on error; a container already gone is not an error.
func RemoveContainer(t testing.TB, c *client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("remove container %.12s: %v", id, err)
	}
}

// WaitExit waits up to within for the container to stop running and
// returns its exit code. It fails the test on timeout, with the logs.
func WaitExit(t testing.TB, c *client.Client, id string, within time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	wr := c.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-wr.Result:
		if r.Error != nil && r.Error.Message != "" {
			t.Fatalf("wait for container %.12s: %s", id, r.Error.Message)
		}
		return r.StatusCode
	case err := <-wr.Error:
		t.Fatalf("container %.12s did not exit within %s: %v\nlogs:\n%s", id, within, err, Logs(t, c, id))
	}
	return 0
}

// ExpectExit waits for the container to exit with code want, and fails the
// test with its logs otherwise. It returns the logs.
func ExpectExit(t testing.TB, c *client.Client, id string, want int64, within time.Duration) string {
	t.Helper()
	code := WaitExit(t, c, id, within)
	logs := Logs(t, c, id)
	if code != want {
		t.Fatalf("container %.12s exited with %d, want %d; logs:\n%s", id, code, want, logs)
	}
	return logs
}

// Logs returns the container's stdout and stderr so far, stdout first.
func Logs(t testing.TB, c *client.Client, id string) string {
	t.Helper()
	stdout, stderr, err := LogStreams(c, id)
	if err != nil {
		return fmt.Sprintf("(logs of %.12s: %v)", id, err)
	}
	if stderr == "" {
		return stdout
	}
	return stdout + stderr
}

// LogStreams returns the container's stdout and stderr so far, apart.
func LogStreams(c *client.Client, id string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := c.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	var o, e bytes.Buffer
	if _, err := stdcopy.StdCopy(&o, &e, rc); err != nil {
		return o.String(), e.String(), fmt.Errorf("demultiplex logs of %.12s: %w", id, err)
	}
	return o.String(), e.String(), nil
}

// WaitRunning waits up to within until the container's main process runs,
// and returns its pid.
func WaitRunning(t testing.TB, c *client.Client, id string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res, err := c.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect container %.12s: %v", id, err)
		}
		ci := res.Container
		if ci.State != nil && ci.State.Running && ci.State.Pid > 0 {
			return ci.State.Pid
		}
		if ci.State != nil && !ci.State.Running && ci.State.Status == "exited" {
			t.Fatalf("container %.12s exited with %d before it was seen running; logs:\n%s",
				id, ci.State.ExitCode, Logs(t, c, id))
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %.12s not running within %s", id, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
