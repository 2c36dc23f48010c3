package paper

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// point is a cgroup's bytes read from the device at a time.
type point struct {
	t time.Time
	b uint64
}

// sampler reads one cgroup's read bytes on one device every period, so
// the bulk container's throughput can be cut into any window afterwards.
// One v1 read is a pread of a kept file, so a 2 ms period costs little.
type sampler struct {
	mu   sync.Mutex
	pts  []point
	err  error
	end  chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// It enables v1 accounting on dev first, as the daemon does: on a device
// nobody has written a throttle rule for, the v1 byte counters read zero, and
// phases that run without the daemon (idle, solo, original, bfq, static) would
// measure nothing on a fresh machine.
func startSampler(ctx context.Context, h cgroupfs.Hierarchy, rel string, dev cgroupfs.Dev, period time.Duration) (*sampler, error) {
	if err := h.EnableV1Accounting(dev); err != nil {
		return nil, fmt.Errorf("enable v1 I/O accounting on %s: %w", dev, err)
	}
	cg, err := h.Open(rel)
	if err != nil {
		return nil, err
	}
	s := &sampler{end: make(chan struct{})}
	read := func() {
		st, err := cg.ReadIO()
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			if s.err == nil {
				s.err = err
			}
			return
		}
		d, _ := st.Device(dev)
		s.pts = append(s.pts, point{now, d.RBytes})
	}
	read()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cg.Close()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.end:
				read()
				return
			case <-tk.C:
				read()
			}
		}
	}()
	return s, nil
}

// stop takes a last sample and ends the sampling; later calls do nothing.
func (s *sampler) stop() {
	s.once.Do(func() { close(s.end) })
	s.wg.Wait()
}

// at is the counter at t, linearly interpolated between samples.
func (s *sampler) at(t time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pts
	if len(p) == 0 {
		return 0
	}
	i := sort.Search(len(p), func(i int) bool { return !p[i].t.Before(t) })
	switch {
	case i == 0:
		return float64(p[0].b)
	case i == len(p):
		return float64(p[len(p)-1].b)
	}
	a, b := p[i-1], p[i]
	span := b.t.Sub(a.t).Seconds()
	if span <= 0 {
		return float64(b.b)
	}
	f := t.Sub(a.t).Seconds() / span
	return float64(a.b) + f*float64(b.b-a.b)
}

// window is a time interval.
type window struct{ from, to time.Time }

// bytesIn is what the cgroup read during the union of ws, and how long
// that union lasted.
func (s *sampler) bytesIn(ws []window) (bytes float64, secs float64) {
	for _, w := range union(ws) {
		bytes += s.at(w.to) - s.at(w.from)
		secs += w.to.Sub(w.from).Seconds()
	}
	return bytes, secs
}

// union merges overlapping windows.
func union(ws []window) []window {
	ws = append([]window(nil), ws...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].from.Before(ws[j].from) })
	var out []window
	for _, w := range ws {
		if !w.to.After(w.from) {
			continue
		}
		if n := len(out); n > 0 && !w.from.After(out[n-1].to) {
			if w.to.After(out[n-1].to) {
				out[n-1].to = w.to
			}
			continue
		}
		out = append(out, w)
	}
	return out
}
