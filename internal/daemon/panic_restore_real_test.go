package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
)

// panicObserver panics in the tick once armed: a bug of the loop, as the
// negative counter Add of issue 18 was.
type panicObserver struct {
	nopObserver
	armed atomic.Bool
}

type loopBug struct{}

func (o *panicObserver) ObserveTick(time.Duration) {
	if o.armed.Load() {
		panic(loopBug{})
	}
}

// panicSource is a real source whose goroutine panics once armed, after
// it has sent what it found.
type panicSource struct {
	source.Source
	armed chan struct{}
}

func (s *panicSource) Run(ctx context.Context, out chan<- source.Event) error {
	go s.Source.Run(ctx, out)
	select {
	case <-s.armed:
		panic(loopBug{})
	case <-ctx.Done():
		return nil
	}
}

// TestRealDaemonPanicRestores: a panic of the loop, or of the workload
// source's goroutine, ends Run with a *PanicError (nothing hides the bug:
// run exits 3), and by then every original is back on the real cgroups and
// the state file holds none: a crashed daemon must not leave its weights
// and caps in force until the next start (issue 18).
// TestRunPanicRestoresAndReturns proves the loop's case with a fake
// actuator; this is the real kernel's word, and the source's case.
func TestRealDaemonPanicRestores(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host v1 test")
	}
	t.Run("loop", func(t *testing.T) { panicRestores(t, false) })
	t.Run("source", func(t *testing.T) { panicRestores(t, true) })
}

func panicRestores(t *testing.T, inSource bool) {
	r := newRig(t, "bfq", host.MechBFQWeight)
	small := r.child(t, "small")
	native := realcg.Native(t, r.kind, 300)
	if err := mech.Write(r.h, r.kind, r.dev.Dev, small, strconv.FormatUint(native, 10)); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "state.json")
	opts := r.options(t, stateFile)
	obs := &panicObserver{}
	src := &panicSource{Source: opts.Source, armed: make(chan struct{})}
	if inSource {
		opts.Source = src
	} else {
		opts.Observer = obs
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- d.Run(ctx) }()
	waitFor(t, d, "small at level 1", levelIs("small", 1))
	if v, _ := r.weight(t, small); v != realcg.Native(t, r.kind, 1000) {
		t.Fatalf("level 1 weight of small = %d, want the daemon's 1000", v)
	}
	if inSource {
		close(src.armed)
	} else {
		obs.armed.Store(true)
	}
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60 s of the panic being armed")
	}
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run ended with %v, want a *PanicError", err)
	}
	if _, ok := pe.Value.(loopBug); !ok {
		t.Fatalf("Run's panic error holds %v (%T), want the panic itself", pe.Value, pe.Value)
	}
	if v, ok := r.weight(t, small); !ok || v != native {
		t.Fatalf("after the loop's panic small's weight is %d (set %v), want the original %d restored", v, ok, native)
	}
	b, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"originals": []`) {
		t.Fatalf("state file after the restore on panic still holds originals:\n%s", b)
	}
}
