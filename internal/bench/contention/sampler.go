package contention

import (
	"errors"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// sample is one reading of the neighbour's cgroup and of the device.
type sample struct {
	t      time.Time
	cgroup uint64 // bytes its cgroup was charged on the device
	device uint64 // bytes the device moved
}

// sampler reads the neighbour's cgroup counters
// (blkio.throttle.io_service_bytes, on v1) and the device's stat every
// period, so the throughput of any window can be read afterwards.
type sampler struct {
	cg      *cgroupfs.Cgroup
	devStat *cgroupfs.BlockStatFile
	dev     cgroupfs.Dev
	period  time.Duration

	// readMu serialises reads: cg and devStat read into buffers of their
	// own, and mark reads from the caller's goroutine beside the loop.
	readMu sync.Mutex

	mu      sync.Mutex
	samples []sample
	fail    error
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func startSampler(h cgroupfs.Hierarchy, rel string, dev cgroupfs.Dev, devStat string, period time.Duration) (*sampler, error) {
	cg, err := h.Open(rel)
	if err != nil {
		return nil, err
	}
	ds, err := cgroupfs.OpenBlockStat(devStat)
	if err != nil {
		cg.Close()
		return nil, err
	}
	s := &sampler{cg: cg, devStat: ds, dev: dev, period: period, done: make(chan struct{}), stopped: make(chan struct{})}
	s.read()
	go s.loop()
	return s, nil
}

func (s *sampler) loop() {
	defer close(s.stopped)
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			s.read()
			return
		case <-t.C:
			s.read()
		}
	}
}

// read takes one sample.
func (s *sampler) read() {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	st, err := s.cg.ReadIO()
	var x sample
	if err == nil {
		for _, d := range st.Devices {
			if d.Dev == s.dev {
				x.cgroup = d.Bytes()
			}
		}
		var b cgroupfs.BlockStat
		b, err = s.devStat.Read()
		x.device = (b.ReadSectors + b.WriteSectors) * 512
	}
	x.t = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.fail == nil && !errors.Is(err, cgroupfs.ErrCgroupGone) {
			s.fail = err
		}
		return
	}
	s.samples = append(s.samples, x)
}

// mark takes a sample now (a phase begins).
func (s *sampler) mark() { s.read() }

// stop ends the sampling; it may be called more than once.
func (s *sampler) stop() {
	s.once.Do(func() {
		close(s.done)
		<-s.stopped
		s.cg.Close()
		s.devStat.Close()
	})
}

func (s *sampler) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail
}

func (s *sampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.samples)
}

// window is the throughput between a and b, counters interpolated
// linearly between the samples around each end.
func (s *sampler) window(a, b time.Time) Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := b.Sub(a).Seconds()
	if sec <= 0 || len(s.samples) < 2 {
		return Window{}
	}
	ca, da := s.at(a)
	cb, db := s.at(b)
	return Window{Cgroup: (cb - ca) / sec, Device: (db - da) / sec}
}

// at interpolates both counters at t, clamped to the samples' span.
func (s *sampler) at(t time.Time) (cg, dev float64) {
	xs := s.samples
	if !t.After(xs[0].t) {
		return float64(xs[0].cgroup), float64(xs[0].device)
	}
	for i := 1; i < len(xs); i++ {
		if t.After(xs[i].t) {
			continue
		}
		p, q := xs[i-1], xs[i]
		f := float64(t.Sub(p.t)) / float64(q.t.Sub(p.t))
		return float64(p.cgroup) + f*(float64(q.cgroup)-float64(p.cgroup)),
			float64(p.device) + f*(float64(q.device)-float64(p.device))
	}
	l := xs[len(xs)-1]
	return float64(l.cgroup), float64(l.device)
}
