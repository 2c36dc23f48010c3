package throttle

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// panicInFlight panics in the throttle's loop once armed: a bug there.
type panicInFlight struct{ armed chan struct{} }

type loopBug struct{}

func (p panicInFlight) InFlight(string, cgroupfs.Dev) (float64, bool) {
	select {
	case <-p.armed:
		panic(loopBug{})
	default:
		return 0, false
	}
}

// TestThrottleLoopPanicHandedOver: a panic in the fast loop's goroutine
// does not end the process (its caps would stay in the cgroups): the loop
// logs it with its stack at error level, ends, and hands it to
// Options.OnPanic, whose caller restores; Stop still returns. Without the
// recover the test binary dies of the panic.
func TestThrottleLoopPanicHandedOver(t *testing.T) {
	t.Parallel()
	f := newFakeThrottleTree(t, "/p/a")
	var logs testkit.SyncBuffer
	type handed struct {
		v     any
		stack []byte
	}
	got := make(chan handed, 1)
	inf := panicInFlight{armed: make(chan struct{})}
	th := New(Config{InFlight: inf}, Options{Hierarchy: f.h, Name: "loop0", Dev: fakeDev, SysRoot: f.sys,
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnPanic: func(v any, stack []byte) { got <- handed{v, stack} }})
	th.Update([]Member{{Cgroup: "/p/a", Level: 4, Durable: true}})
	time.Sleep(5 * DefaultPeriod) // the loop runs, no panic yet
	close(inf.armed)
	var h handed
	select {
	case h = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("OnPanic not called within 10 s of the panic being armed")
	}
	if _, ok := h.v.(loopBug); !ok {
		t.Fatalf("OnPanic got %v (%T), want the panic itself", h.v, h.v)
	}
	if !strings.Contains(string(h.stack), "panicInFlight.InFlight") {
		t.Fatalf("OnPanic's stack does not show where it panicked:\n%s", h.stack)
	}
	l := logs.String()
	if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "throttle loop panicked") || !strings.Contains(l, "panicInFlight.InFlight") {
		t.Fatalf("no error record with the panic's stack in the log:\n%s", l)
	}
	stopped := make(chan struct{})
	go func() { th.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after the loop's panic")
	}
}
