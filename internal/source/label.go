package source

import "context"

// WithLabel narrows inner to the workloads whose label key has value: only
// their events pass, including their Removed events (which may carry no
// labels), and inner's Synced. Benchmarks and tests use it on a shared Docker engine so that
// a daemon under test never tracks or touches anybody else's containers.
func WithLabel(inner Source, key, value string) Source {
	return labelFilter{inner: inner, key: key, value: value}
}

type labelFilter struct {
	inner      Source
	key, value string
}

func (f labelFilter) Name() string { return f.inner.Name() }

func (f labelFilter) Run(ctx context.Context, out chan<- Event) error {
	in := make(chan Event, 64)
	done := make(chan error, 1)
	go func() { done <- f.inner.Run(ctx, in) }()
	ours := map[string]bool{}
	for {
		select {
		case err := <-done:
			return err
		case ev := <-in:
			if ev.Kind != Synced { // Synced names no workload: it always passes
				if v, ok := ev.Workload.Labels[f.key]; ok && v == f.value {
					ours[ev.Workload.ID] = true
				}
				if !ours[ev.Workload.ID] {
					continue
				}
				if ev.Kind == Removed {
					delete(ours, ev.Workload.ID)
				}
			}
			if err := Send(ctx, out, ev); err != nil {
				return <-done
			}
		}
	}
}
