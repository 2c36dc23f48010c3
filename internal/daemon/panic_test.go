package daemon

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// panicActuator panics in its third Apply and counts RestoreAll calls.
type panicActuator struct {
	nullActuator
	applies, restores *atomic.Int32
}

func (a panicActuator) Apply(time.Time, []actuate.Target) ([]actuate.DeviceStatus, error) {
	if a.applies.Add(1) == 3 {
		var m map[string]int
		m["a bug"]++ // a real runtime panic: assignment to entry in nil map
	}
	return nil, nil
}

func (a panicActuator) RestoreAll() error { a.restores.Add(1); return nil }

// TestRunPanicRestoresAndReturns: a panic in the loop (issue 18: a
// counter's negative Add) does not kill the process with the originals
// left in the cgroups: Run restores every original and returns a
// *PanicError that names the panic, with the stack.
func TestRunPanicRestoresAndReturns(t *testing.T) {
	t.Parallel()
	var applies, restores atomic.Int32
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) {
			return panicActuator{applies: &applies, restores: &restores}, nil
		},
		Interval: 10 * time.Millisecond, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = d.Run(ctx)
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run after a panic of the loop returned %v, want a *PanicError", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended, not at the panic")
	}
	if got := restores.Load(); got != 1 {
		t.Fatalf("RestoreAll called %d times after the panic, want 1", got)
	}
	if pe.Error() != "daemon loop panicked: assignment to entry in nil map" || len(pe.Stack) == 0 {
		t.Fatalf("panic error %q with %d bytes of stack", pe.Error(), len(pe.Stack))
	}
}

// TestRunThrottlePanicRestores: a panic of a throttle's loop, handed over
// through actuate.Config.OnPanic (internal/actuate's TestThrottlePanicRestores
// shows the throttle does), ends Run as the loop's own does: every
// original restored once, and a *PanicError holding the panic and its
// stack.
func TestRunThrottlePanicRestores(t *testing.T) {
	t.Parallel()
	var applies, restores atomic.Int32
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(cfg actuate.Config, _ []actuate.Original) (Actuator, error) {
			if cfg.OnPanic == nil {
				return nil, errors.New("the daemon gave the actuator no OnPanic")
			}
			// The throttle's goroutine, panicking after a few ticks.
			go func() {
				time.Sleep(50 * time.Millisecond)
				cfg.OnPanic("a throttle bug", []byte("goroutine 7 [running]:\nthrottle.(*Throttle).step"))
			}()
			return panicActuator{applies: &applies, restores: &restores}, nil
		},
		Interval: 10 * time.Millisecond, NoFile: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	applies.Store(-1 << 20) // the loop itself does not panic here
	err = d.Run(ctx)
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run after a throttle's panic returned %v, want a *PanicError", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended, not at the panic")
	}
	if got := restores.Load(); got != 1 {
		t.Fatalf("RestoreAll called %d times after the panic, want 1", got)
	}
	if pe.Value != "a throttle bug" || len(pe.Stack) == 0 {
		t.Fatalf("panic error %v with %d bytes of stack", pe.Value, len(pe.Stack))
	}
}
