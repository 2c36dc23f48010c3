package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// makeMu serializes makeImage: `make image` writes the one build context
// deploy/docker.
var makeMu sync.Mutex

// makeImage builds the image as the README does, `make image`, as tag
// (IMAGE=tag, the test's label through DOCKER_BUILD_FLAGS), and removes
// the image when the test ends, and the binary the recipe put into
// deploy/docker unless one was there before. It checks that the binary is
// static (no ELF interpreter: it must run in FROM scratch), and returns it
// and how long the make took.
func makeImage(t *testing.T, c *client.Client, tag string) ([]byte, time.Duration) {
	t.Helper()
	for _, tool := range []string{"make", "docker", "go"} {
		_, err := exec.LookPath(tool)
		testkit.Need(t, err == nil, "%s not found (make image runs it)", tool)
	}
	t.Cleanup(func() {
		_, err := c.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove image %s: %v", tag, err)
		}
	})
	makeMu.Lock()
	defer makeMu.Unlock()
	const ctxBin = "docker/ddiskqos"
	_, statErr := os.Stat(ctxBin)
	if errors.Is(statErr, fs.ErrNotExist) {
		defer os.Remove(ctxBin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", "..", "image", "IMAGE="+tag,
		"DOCKER_BUILD_FLAGS=--label "+dockertest.LabelTest+"="+t.Name())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("make image IMAGE=%s: %v\n%s", tag, err, out)
	}
	bin := mustRead(t, ctxBin)
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("make image: %s is not an ELF binary: %v", ctxBin, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("make image: %s is dynamically linked (has an ELF interpreter): FROM scratch cannot run it", ctxBin)
		}
	}
	return bin, took
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startContainer creates and starts a container of tag running args, and
// removes it when the test ends (also after a failure).
func startContainer(t *testing.T, c *client.Client, name string, cfg *container.Config, hc *container.HostConfig) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Labels = map[string]string{dockertest.LabelTest: t.Name()}
	cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, err := c.ContainerRemove(context.Background(), cr.ID, client.ContainerRemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", name, err)
		}
	})
	if _, err := c.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	return cr.ID
}

// logs returns a container's stdout and stderr.
func logs(c *client.Client, id string) (string, string) {
	rc, err := c.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", "logs: " + err.Error()
	}
	defer rc.Close()
	var o, e bytes.Buffer
	stdcopy.StdCopy(&o, &e, rc)
	return o.String(), e.String()
}

// status runs `ddiskqos status --json` from the image in the network
// namespace of the daemon's container (which has no other network) and
// returns the snapshot, nil while the daemon does not answer yet.
func status(t *testing.T, c *client.Client, tag, daemon string) (*snapshot.Snapshot, string) {
	t.Helper()
	name := fmt.Sprintf("ddiskqos-test-status-%d-%d", os.Getpid(), time.Now().UnixNano())
	id := startContainer(t, c, name, &container.Config{Image: tag, Cmd: []string{"status", "--json"}},
		&container.HostConfig{NetworkMode: container.NetworkMode("container:" + daemon)})
	code := dockertest.WaitExit(t, c, id, 30*time.Second)
	stdout, stderr := logs(c, id)
	dockertest.RemoveContainer(t, c, id)
	if code != 0 {
		return nil, stderr
	}
	var s snapshot.Snapshot
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("ddiskqos status --json: %v\n%s", err, stdout)
	}
	return &s, ""
}

// readmeDockerRun is the README's `docker run -d --name ddiskqos ...` line,
// continuation lines joined: its volumes, whether the root is read-only,
// the network, the image and the arguments after it.
type dockerRun struct {
	volumes  []string
	readOnly bool
	network  string
	image    string
	args     []string
}

func readmeDockerRun(t *testing.T) dockerRun {
	t.Helper()
	sec := installSection(t)
	i := strings.Index(sec, "docker run -d --name ddiskqos ")
	if i < 0 {
		t.Fatal("README's Installing section has no `docker run -d --name ddiskqos ...` line")
	}
	var joined []string
	for _, l := range strings.Split(sec[i:], "\n") {
		l, _, _ = strings.Cut(l, "#")
		l = strings.TrimSpace(l)
		cont := strings.HasSuffix(l, "\\")
		joined = append(joined, strings.TrimSuffix(l, "\\"))
		if !cont {
			break
		}
	}
	f := strings.Fields(strings.Join(joined, " "))[2:] // after "docker run"
	var r dockerRun
	for j := 0; j < len(f); j++ {
		switch a := f[j]; {
		case a == "-v" || a == "--volume":
			j++
			r.volumes = append(r.volumes, f[j])
		case a == "--network":
			j++
			r.network = f[j]
		case a == "--name" || a == "--restart":
			j++
		case a == "--read-only":
			r.readOnly = true
		case a == "-d":
		case strings.HasPrefix(a, "-"):
			t.Fatalf("README's docker run: flag %s unknown to this test", a)
		default:
			r.image, r.args = a, f[j+1:]
			return r
		}
	}
	t.Fatalf("README's docker run %q: no image", f)
	return r
}

// TestRealContainerImage builds the image of deploy/docker on this
// machine's engine and runs the daemon in it, as the README says, managing
// other containers: two daemons from the image, one with the cgroup source
// over a parent cgroup of this test's own (it writes: a daemon with the
// Docker source would act on every container of the shared engine) and one
// with the Docker source through the mounted socket, in dry-run (it
// decides for every container but writes nothing). A container from the
// same image streams from a BFQ loop device under that parent; both
// daemons must put it at level 4, the first must write level 4's weight
// into its cgroup (read back from the kernel), and `docker stop` of it
// must put the original back.
func TestRealContainerImage(t *testing.T) {
	testkit.NeedRoot(t)
	c := dockertest.Client(t)
	tag := dockertest.UniqueTag("deploy")
	bin, took := makeImage(t, c, tag)
	ctx := context.Background()
	ii, err := c.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ii.Config == nil || ii.Config.Labels[dockertest.LabelTest] != t.Name() {
		t.Errorf("image %s: labels %v, want %s=%s (make image's DOCKER_BUILD_FLAGS)", tag, ii.Config, dockertest.LabelTest, t.Name())
	}
	if ii.Config == nil || !slices.Equal(ii.Config.Entrypoint, []string{"/ddiskqos"}) || len(ii.Config.Cmd) == 0 || ii.Config.Cmd[0] != "run" {
		t.Fatalf("image %s: config %+v, want entrypoint /ddiskqos and cmd run ...", tag, ii.Config)
	}
	parseRunArgs(t, ii.Config.Cmd[1:])
	t.Logf("image %s built by make image in %s: %.1f MB (binary %.1f MB), cmd %q",
		tag, took.Round(time.Millisecond), float64(ii.Size)/1e6, float64(len(bin))/1e6, ii.Config.Cmd)

	// The image's binary says which build it is, as the binary make image
	// built says on the host.
	vid := startContainer(t, c, fmt.Sprintf("ddiskqos-test-deploy-version-%d", os.Getpid()),
		&container.Config{Image: tag, Cmd: []string{"version"}}, &container.HostConfig{NetworkMode: "none"})
	vcode := dockertest.WaitExit(t, c, vid, 30*time.Second)
	vout, verr := logs(c, vid)
	dockertest.RemoveContainer(t, c, vid)
	versionBin := filepath.Join(t.TempDir(), "ddiskqos")
	if err := os.WriteFile(versionBin, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	hostOut, err := exec.Command(versionBin, "version").Output()
	if vcode != 0 || err != nil || vout != string(hostOut) || !strings.HasPrefix(vout, "ddiskqos ") {
		t.Errorf("ddiskqos version in the image: exit %d, %q %s; on the host: %v, %q", vcode, vout, verr, err, hostOut)
	}

	loop := testkit.LoopDevice(t, 256)
	testkit.SetScheduler(t, loop.Name, "bfq")
	const cgroupRoot = "/sys/fs/cgroup"
	parent := fmt.Sprintf("/ddiskqos-deploy-image-%d", os.Getpid())
	testkit.Cgroup(t, cgroupRoot+"/blkio"+parent)
	// Docker creates the parent in the other hierarchies too; removed
	// after the containers (cleanups run last first).
	t.Cleanup(func() {
		hs, _ := os.ReadDir(cgroupRoot)
		for _, h := range hs {
			if d := filepath.Join(cgroupRoot, h.Name(), parent); h.Name() != "blkio" {
				if _, err := os.Stat(d); err == nil {
					testkit.RemoveCgroup(t, d)
				}
			}
		}
	})

	// The daemons, as the README runs them: its volumes (the state
	// directory a temporary one of each daemon's own), its read-only root,
	// the image's default arguments, but --network none (the status
	// containers join that network namespace) and this test's flags.
	rd := readmeDockerRun(t)
	if rd.image != ImageRef || len(rd.args) != 0 || !rd.readOnly {
		t.Fatalf("README's docker run: image %s, arguments %q, read-only %v; want %s, none (the image's default), --read-only",
			rd.image, rd.args, rd.readOnly, ImageRef)
	}
	binds := func(runDir string) []string {
		var out []string
		for _, v := range rd.volumes {
			if src, dst, _ := strings.Cut(v, ":"); src == "/run/ddiskqos" {
				v = runDir + ":" + dst
			}
			out = append(out, v)
		}
		return out
	}
	common := []string{"--devices", loop.Name, "--interval", "250ms"}
	writerRun := t.TempDir() // the writer's /run/ddiskqos
	writer := startContainer(t, c, fmt.Sprintf("ddiskqos-test-deploy-cgroup-%d", os.Getpid()),
		&container.Config{Image: tag, Cmd: append(slices.Clone(ii.Config.Cmd), append([]string{"--source", "cgroup", "--cgroup-parent", parent}, common...)...)},
		&container.HostConfig{NetworkMode: "none", ReadonlyRootfs: rd.readOnly, Binds: binds(writerRun)})
	observer := startContainer(t, c, fmt.Sprintf("ddiskqos-test-deploy-docker-%d", os.Getpid()),
		&container.Config{Image: tag, Cmd: append(slices.Clone(ii.Config.Cmd), append([]string{"--source", "docker", "--dry-run"}, common...)...)},
		&container.HostConfig{NetworkMode: "none", ReadonlyRootfs: rd.readOnly, Binds: binds(t.TempDir())})
	daemons := map[string]string{writer: "cgroup source", observer: "docker source, dry-run"}
	dump := func() string {
		var b strings.Builder
		for id, what := range daemons {
			o, e := logs(c, id)
			fmt.Fprintf(&b, "--- daemon (%s) log:\n%s%s", what, o, e)
		}
		return b.String()
	}
	for id, what := range daemons {
		var s *snapshot.Snapshot
		var why string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if s, why = status(t, c, tag, id); s != nil && s.Tick > 0 {
				break
			}
		}
		if s == nil || s.Tick == 0 {
			t.Fatalf("daemon (%s) in a container: no tick within 30 s (%s)\n%s", what, why, dump())
		}
	}

	// The container holds the host lock in the host's /run/ddiskqos: a
	// daemon started on the host as the systemd unit starts it (its
	// /run/ddiskqos here the writer's, through $DDISKQOS_LOCK_FILE and
	// --state-file) refuses to run beside it.
	hostBin := filepath.Join(t.TempDir(), "ddiskqos")
	if err := os.WriteFile(hostBin, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	second := exec.CommandContext(hctx, hostBin, "run", "--source", "cgroup", "--cgroup-parent", parent, "--devices", loop.Name,
		"--listen", "", "--state-file", writerRun+"/state.json")
	second.Env = append(os.Environ(), "DDISKQOS_LOCK_FILE="+writerRun+"/ddiskqos.lock")
	out, err := second.CombinedOutput()
	if code := second.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "another ddiskqos daemon runs on this host") {
		t.Fatalf("a daemon on the host beside the one in the container: exit %d (%v), want 1 and a refusal:\n%s", code, err, out)
	}
	t.Logf("the host daemon refused to start beside the container's: %s", strings.TrimSpace(string(out)))

	// The streamer, from the same image, under the parent.
	streamer := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: tag, CgroupParent: parent,
		Args:    []string{"workload", "--direct", "--loop", "--duration", "120s", "read", loop.Path},
		Devices: []dockertest.Device{{Host: loop.Path}}})
	knob := filepath.Join(cgroupRoot, "blkio", parent, streamer.ID, "blkio.bfq.weight_device")
	want := loop.Dev() + " 100" // level 4's weight
	var got []byte
	start := time.Now()
	for deadline := start.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, _ = os.ReadFile(knob); slices.Contains(strings.Split(string(got), "\n"), want) {
			break
		}
	}
	if !slices.Contains(strings.Split(string(got), "\n"), want) {
		t.Fatalf("%s = %q 30 s after the streamer started, want a line %q (level 4)\n%s", knob, got, want, dump())
	}
	demoted := time.Since(start)

	// What each daemon says about the streamer.
	find := func(s *snapshot.Snapshot, match func(*snapshot.Workload) bool) *snapshot.Workload {
		for _, w := range s.Workloads {
			if match(w) {
				return w
			}
		}
		return nil
	}
	sw, why := status(t, c, tag, writer)
	if sw == nil {
		t.Fatalf("ddiskqos status of the cgroup-source daemon: %s\n%s", why, dump())
	}
	w := find(sw, func(w *snapshot.Workload) bool { return strings.HasSuffix(w.Cgroup, "/"+streamer.ID) })
	if !strings.HasPrefix(sw.Source, "cgroup") || sw.DryRun || w == nil || w.Level != 4 {
		t.Fatalf("cgroup-source daemon: source %s, dry-run %v, streamer %+v; want it at level 4\n%s", sw.Source, sw.DryRun, w, dump())
	}
	if len(w.Applied) != 1 || w.Applied[0].Device != loop.Name || w.Applied[0].Mechanism != "bfq-weight+throttle" || w.Applied[0].Weight != 100 || w.Applied[0].Error != "" {
		t.Errorf("cgroup-source daemon: applied %+v, want bfq-weight+throttle, weight 100 on %s", w.Applied, loop.Name)
	}
	var so *snapshot.Snapshot
	var wo *snapshot.Workload
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if so, why = status(t, c, tag, observer); so == nil {
			t.Fatalf("ddiskqos status of the docker-source daemon: %s\n%s", why, dump())
		}
		if wo = find(so, func(w *snapshot.Workload) bool { return w.ID == streamer.ID }); wo != nil && wo.Level == 4 {
			break
		}
	}
	if !strings.HasPrefix(so.Source, "docker") || !so.DryRun || wo == nil || wo.Level != 4 || wo.Name != streamer.Name {
		t.Fatalf("docker-source daemon: source %s, dry-run %v, streamer %+v; want %s at level 4\n%s", so.Source, so.DryRun, wo, streamer.Name, dump())
	}
	t.Logf("streamer at level 4 after %s: weight %q in its cgroup (cgroup-source daemon), level 4 by name %s through the Docker socket (docker-source daemon, %d containers seen)",
		demoted.Round(time.Millisecond), want, wo.Name, len(so.Workloads))

	// docker stop: SIGTERM to the daemon, which restores the original
	// (no per-device weight: only the "default" line) and exits 0.
	timeout := 20
	if _, err := c.ContainerStop(ctx, writer, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ContainerInspect(ctx, writer, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci := res.Container
	if ci.State.ExitCode != 0 {
		t.Errorf("daemon container exited %d after docker stop, want 0\n%s", ci.State.ExitCode, dump())
	}
	after, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(after), loop.Dev()+" ") {
		t.Errorf("%s after docker stop = %q: the weight of %s is still there", knob, after, loop.Dev())
	}
	t.Logf("docker stop: daemon exited %d, %s back to %q", ci.State.ExitCode, knob, strings.TrimSpace(string(after)))
}

// TestDockerfile checks the Dockerfile without an engine: an image of
// nothing but the binary, whose default arguments `ddiskqos run` accepts
// and read the host's /proc where the README's docker run mounts it.
func TestDockerfile(t *testing.T) {
	var from, entry, cmd string
	var copies []string
	for _, l := range strings.Split(string(mustRead(t, "docker/Dockerfile")), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ins, arg, _ := strings.Cut(l, " ")
		switch strings.ToUpper(ins) {
		case "FROM":
			from = arg
		case "COPY":
			copies = append(copies, arg)
		case "ENTRYPOINT":
			entry = arg
		case "CMD":
			cmd = arg
		default:
			t.Errorf("Dockerfile: instruction %s: the image is the binary only", ins)
		}
	}
	if from != "scratch" || !slices.Equal(copies, []string{"ddiskqos /ddiskqos"}) || entry != `["/ddiskqos"]` {
		t.Errorf("Dockerfile: FROM %s, COPY %q, ENTRYPOINT %s; want FROM scratch, COPY ddiskqos /ddiskqos, ENTRYPOINT [\"/ddiskqos\"] (built offline, no base image)", from, copies, entry)
	}
	var args []string
	if err := json.Unmarshal([]byte(cmd), &args); err != nil || len(args) == 0 || args[0] != "run" {
		t.Fatalf("Dockerfile: CMD %s: want the JSON form [\"run\", flags...] (%v)", cmd, err)
	}
	cfg := parseRunArgs(t, args[1:])
	rd := readmeDockerRun(t)
	if !slices.Contains(rd.volumes, "/proc:"+cfg.Paths.Proc+":ro") {
		t.Errorf("the image reads the host's /proc at %s, but README's docker run mounts %q", cfg.Paths.Proc, rd.volumes)
	}
	if !strings.Contains(installSection(t), "\nmake image ") {
		t.Errorf("README's Installing section does not build the image with make image")
	}
	// What make image does (make -n prints the recipe): a static binary
	// into the build context, then docker build of it as ImageRef.
	_, err := exec.LookPath("make")
	testkit.Need(t, err == nil, "make not found (to read make image's recipe)")
	out, err := exec.Command("make", "-s", "-n", "-C", "..", "image").Output()
	if err != nil {
		t.Fatalf("make -n image: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "CGO_ENABLED=0 ") || !strings.HasSuffix(lines[0], " -o deploy/docker/ddiskqos ./cmd/ddiskqos") ||
		!strings.HasPrefix(lines[1], "docker build ") || !strings.HasSuffix(lines[1], " -t "+ImageRef+" deploy/docker") {
		t.Errorf("make image runs\n%s\nwant CGO_ENABLED=0 go build ... -o deploy/docker/ddiskqos ./cmd/ddiskqos, then docker build ... -t %s deploy/docker", out, ImageRef)
	}
}
