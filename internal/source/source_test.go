package source

import (
	"context"
	"errors"
	"testing"
)

func TestWorkloadEqual(t *testing.T) {
	t.Parallel()
	base := Workload{ID: "a", Name: "a", Labels: map[string]string{"k": "v"}, Cgroup: "/docker/a", Pid: 1}
	for _, tc := range []struct {
		name string
		edit func(*Workload)
		want bool
	}{
		{"same", func(*Workload) {}, true},
		{"labels dropped", func(w *Workload) { w.Labels = map[string]string{} }, false},
		{"label value", func(w *Workload) { w.Labels = map[string]string{"k": "x"} }, false},
		{"name", func(w *Workload) { w.Name = "b" }, false},
		{"cgroup", func(w *Workload) { w.Cgroup = "/docker/b" }, false},
		{"pid", func(w *Workload) { w.Pid = 2 }, false},
		{"id", func(w *Workload) { w.ID = "b" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := base
			o.Labels = map[string]string{"k": "v"}
			tc.edit(&o)
			if got := base.Equal(o); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
		})
	}
	if !(Workload{}).Equal(Workload{Labels: map[string]string{}}) {
		t.Error("nil and empty labels differ")
	}
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[EventKind]string{Added: "added", Updated: "updated", Removed: "removed", Synced: "synced", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}

func TestSendHonoursCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Send(ctx, make(chan Event), Event{Kind: Added}); !errors.Is(err, context.Canceled) {
		t.Errorf("Send on a cancelled ctx with no reader = %v, want context.Canceled", err)
	}
	ch := make(chan Event, 1)
	if err := Send(context.Background(), ch, Event{Kind: Removed}); err != nil || (<-ch).Kind != Removed {
		t.Errorf("Send with room = %v", err)
	}
}
