package containers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Spec describes one container.
type Spec struct {
	Name string
	// Args follow the entrypoint, e.g. {"workload", "--json", "read", "/data/f"}.
	Args []string
	// Binds are host directories mounted read-only at the given path.
	Binds map[string]string
	// Gated holds the container at the start line: Args must make it wait
	// for a line on stdin (ddiskqos workload --wait-stdin); Start returns
	// once it printed "ready", and Release lets it go.
	Gated  bool
	Labels map[string]string
}

// Runner starts containers of one image and removes every one of them on
// Close.
type Runner struct {
	c      client.APIClient
	image  string
	labels map[string]string

	mu   sync.Mutex
	live map[string]string // id -> name
}

// NewRunner runs containers of image with labels on every one.
func NewRunner(c client.APIClient, image string, labels map[string]string) *Runner {
	return &Runner{c: c, image: image, labels: labels, live: map[string]string{}}
}

// Container is a started container.
type Container struct {
	ID, Name string
	Pid      int // main process on the host
	r        *Runner
	conn     client.HijackedResponse
	attached bool
	stdout   *bufio.Reader
	pr       *io.PipeReader
	stderr   *lockedBuffer
	copyDone chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start creates and starts a container (network none). A gated one is
// returned once its process waits on stdin.
func (r *Runner) Start(ctx context.Context, s Spec) (*Container, error) {
	labels := map[string]string{}
	for k, v := range r.labels {
		labels[k] = v
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	var mounts []mount.Mount
	for host, in := range s.Binds {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: host, Target: in, ReadOnly: true})
	}
	cfg := &container.Config{Image: r.image, Cmd: s.Args, Labels: labels,
		AttachStdout: true, AttachStderr: true}
	if s.Gated {
		cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin = true, true, true
	}
	cr, err := r.c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: s.Name, Config: cfg,
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: mounts}})
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", s.Name, err)
	}
	r.mu.Lock()
	r.live[cr.ID] = s.Name
	r.mu.Unlock()
	ct := &Container{ID: cr.ID, Name: s.Name, r: r, stderr: &lockedBuffer{}, copyDone: make(chan error, 1)}
	// Attach before start so no output is lost.
	at, err := r.c.ContainerAttach(ctx, cr.ID, client.ContainerAttachOptions{Stream: true, Stdin: s.Gated, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attach container %s: %w", s.Name, err)
	}
	ct.conn = at.HijackedResponse
	ct.attached = true
	pr, pw := io.Pipe()
	ct.pr = pr
	ct.stdout = bufio.NewReader(pr)
	go func() {
		_, err := stdcopy.StdCopy(pw, ct.stderr, ct.conn.Reader)
		pw.CloseWithError(err)
		ct.copyDone <- err
	}()
	if _, err := r.c.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("start container %s: %w", s.Name, err)
	}
	ci, err := r.c.ContainerInspect(ctx, cr.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", s.Name, err)
	}
	if st := ci.Container.State; st != nil {
		ct.Pid = st.Pid
	}
	if s.Gated {
		line, err := readLine(ctx, ct.stdout)
		if err != nil || !strings.HasPrefix(line, "ready ") {
			return nil, fmt.Errorf("container %s: want \"ready <pid>\" first, got %q (%v); stderr: %s", s.Name, line, err, ct.stderr.String())
		}
	}
	return ct, nil
}

// readLine reads one line, giving up when ctx ends.
func readLine(ctx context.Context, r *bufio.Reader) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	select {
	case x := <-ch:
		return x.s, x.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Release lets a gated container start its work.
func (ct *Container) Release() error {
	if _, err := ct.conn.Conn.Write([]byte("go\n")); err != nil {
		return fmt.Errorf("release container %s: %w", ct.Name, err)
	}
	return nil
}

// Wait waits for the container to exit and returns its exit code and the
// rest of its stdout.
func (ct *Container) Wait(ctx context.Context) (int64, string, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(ct.stdout)
		ch <- res{b, err}
	}()
	var out res
	select {
	case out = <-ch:
	case <-ctx.Done():
		ct.pr.CloseWithError(ctx.Err())
		return 0, "", ctx.Err()
	}
	wr := ct.r.c.ContainerWait(ctx, ct.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case w := <-wr.Result:
		if w.Error != nil && w.Error.Message != "" {
			return 0, string(out.b), fmt.Errorf("wait for container %s: %s", ct.Name, w.Error.Message)
		}
		return w.StatusCode, string(out.b), out.err
	case err := <-wr.Error:
		return 0, string(out.b), fmt.Errorf("wait for container %s: %w", ct.Name, err)
	}
}

// Stderr is what the container wrote to stderr so far.
func (ct *Container) Stderr() string { return ct.stderr.String() }

// Stop asks the container's process to end (SIGTERM; the workload then
// prints its result so far) and waits for it; Remove follows.
func (ct *Container) Stop(ctx context.Context, grace time.Duration) error {
	secs := int(grace.Seconds())
	_, err := ct.r.c.ContainerStop(ctx, ct.ID, client.ContainerStopOptions{Timeout: &secs})
	return err
}

// Remove removes the container forcibly; one already gone is not an error.
func (ct *Container) Remove(ctx context.Context) error {
	if ct.attached {
		ct.conn.Close()
		ct.attached = false
	}
	return ct.r.remove(ctx, ct.ID)
}

func (r *Runner) remove(ctx context.Context, id string) error {
	_, err := r.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	r.mu.Lock()
	delete(r.live, id)
	r.mu.Unlock()
	return nil
}

// Close removes every container this runner started and has not removed
// yet. It uses its own deadline, so it works after ctx was cancelled.
func (r *Runner) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.mu.Lock()
	ids := make([]string, 0, len(r.live))
	for id := range r.live {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := r.remove(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CgroupOf returns the cgroup of a process in the v1 hierarchy that has
// controller (e.g. "blkio"), or in the v2 hierarchy when controller is "",
// from /proc/<pid>/cgroup under procRoot.
func CgroupOf(procRoot string, pid int, controller string) (string, error) {
	lines, err := cgroupfs.ReadProcCgroup(procRoot, pid)
	if err != nil {
		return "", err
	}
	p, ok := cgroupfs.CgroupIn(lines, controller)
	if !ok {
		return "", fmt.Errorf("%s/%d/cgroup: no %q hierarchy", procRoot, pid, controller)
	}
	return p, nil
}
