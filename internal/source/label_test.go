package source

import (
	"context"
	"testing"
	"time"
)

type fakeSource []Event

func (f fakeSource) Name() string { return "fake" }

func (f fakeSource) Run(ctx context.Context, out chan<- Event) error {
	for _, ev := range f {
		if err := Send(ctx, out, ev); err != nil {
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

func TestWithLabel(t *testing.T) {
	t.Parallel()
	mine := map[string]string{"run": "a"}
	src := WithLabel(fakeSource{
		{Added, Workload{ID: "1", Labels: mine}},
		{Added, Workload{ID: "2", Labels: map[string]string{"run": "b"}}},
		{Added, Workload{ID: "3"}},
		{Synced, Workload{}}, // names no workload: passes
		{Removed, Workload{ID: "2"}},
		{Removed, Workload{ID: "1"}}, // no labels on removal: still ours
		{Removed, Workload{ID: "1"}}, // forgotten after its removal
	}, "run", "a")
	if src.Name() != "fake" {
		t.Fatalf("Name = %q", src.Name())
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Event, 10)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, out) }()
	var got []Event
	for len(got) < 3 {
		select {
		case ev := <-out:
			got = append(got, ev)
		case <-time.After(5 * time.Second):
			t.Fatalf("got only %+v", got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got[0].Kind != Added || got[0].Workload.ID != "1" || got[1].Kind != Synced ||
		got[2].Kind != Removed || got[2].Workload.ID != "1" {
		t.Fatalf("events %+v", got)
	}
	select {
	case ev := <-out:
		t.Fatalf("extra event %+v", ev)
	default:
	}
}
