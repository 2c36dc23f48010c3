package sensor

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// ProbeBuckets are the sync-write probe's histogram bounds, seconds: a
// healthy disk syncs a 4 KiB write in well under a millisecond to a few;
// the seed's hung `dd oflag=sync` took tens of seconds.
var ProbeBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// SyncProbe writes 4 KiB with O_DSYNC to one file every interval from a
// goroutine of its own (a write that hangs must not stop the daemon's
// loop) and keeps the latencies as a histogram.
type SyncProbe struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	st      snapshot.SyncProbe
	pending time.Time // start of the write in progress
	lastErr error
}

// NewSyncProbe prepares a probe of path (created if missing; a regular
// file ddiskqos owns, rewritten in place). It fails, naming the path, when
// the file cannot be opened for writing.
func NewSyncProbe(path string, now func() time.Time) (*SyncProbe, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_DSYNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sync-write probe %s: %w", path, err)
	}
	f.Close()
	if now == nil {
		now = time.Now
	}
	p := &SyncProbe{path: path, now: now}
	p.st = snapshot.SyncProbe{Path: path, Buckets: ProbeBuckets, Counts: make([]uint64, len(ProbeBuckets))}
	return p, nil
}

// Run writes every interval until ctx ends. A write still waiting when the
// next is due delays it (one write in flight at most).
func (p *SyncProbe) Run(ctx context.Context, interval time.Duration) {
	buf := make([]byte, 4096)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.once(buf)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *SyncProbe) once(buf []byte) {
	start := p.now()
	p.mu.Lock()
	p.pending = start
	p.mu.Unlock()
	f, err := os.OpenFile(p.path, os.O_WRONLY|os.O_CREATE|syscall.O_DSYNC, 0o600)
	if err == nil {
		_, err = f.WriteAt(buf, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	d := p.now().Sub(start).Seconds()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = time.Time{}
	if err != nil {
		p.st.Errors++
		p.lastErr = err
		return
	}
	p.st.Count++
	p.st.Sum += d
	p.st.Last = d
	for i, b := range p.st.Buckets {
		if d <= b {
			p.st.Counts[i]++
		}
	}
}

// Snapshot is the probe's state now (a copy), with the last error.
func (p *SyncProbe) Snapshot() (snapshot.SyncProbe, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.Counts = append([]uint64(nil), p.st.Counts...)
	if !p.pending.IsZero() {
		s.Pending = p.now().Sub(p.pending).Seconds()
	}
	return s, p.lastErr
}
