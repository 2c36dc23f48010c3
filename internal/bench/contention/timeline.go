package contention

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Second is one second of a ddiskqos cell of the host scenario, as the
// daemon saw it after its tick and as the victims lived it: which second
// went bad, and what the daemon was doing then. In the JSON only.
type Second struct {
	// T is the second's start, from when the victims were let go
	// (negative during the warm-up).
	T float64 `json:"t_s"`
	// The device, from the daemon's snapshot taken in the second: the
	// best level that did I/O, the latency controller's share, target
	// and measured protected p99 (µs).
	TopLevel    int     `json:"top_level"`
	Share       float64 `json:"share,omitempty"`
	TargetUs    float64 `json:"target_us,omitempty"`
	ProtectedUs float64 `json:"protected_p99_us,omitempty"`
	StreamerLvl int     `json:"streamer_level,omitempty"`
	StreamerCap uint64  `json:"streamer_cap_bps,omitempty"`
	StreamerBps float64 `json:"streamer_bps,omitempty"`
	// The streamer's request cap and requests per second over the second
	// (from its read_ios between samples), and the device's capacity as
	// the throttle estimates it: which of the two caps holds it.
	StreamerCapIOPS uint64  `json:"streamer_cap_iops,omitempty"`
	StreamerIOPS    float64 `json:"streamer_iops,omitempty"`
	CapacityBps     float64 `json:"capacity_bps,omitempty"`
	CapacityIOPS    float64 `json:"capacity_iops,omitempty"`
	WebLevel        int     `json:"web_level,omitempty"`
	LightLevels     []int   `json:"light_levels,omitempty"`
	WebP99Us        float64 `json:"web_p99_us,omitempty"`
	WebMaxUs        float64 `json:"web_max_us,omitempty"`
	LightMaxUs      float64 `json:"light_max_us,omitempty"`
	LightP99Us      float64 `json:"light_p99_us,omitempty"`
	VictimsSlow     int     `json:"victims_slow,omitempty"` // requests above 3x the unloaded p99
}

// timeline samples a running daemon's snapshot once a second.
type timeline struct {
	acquire snapshot.Acquirer
	dev     string
	t0      time.Time // the victims' start (set by mark), or the start
	stop    chan struct{}
	done    sync.WaitGroup

	// The streamer's read_ios at the last sample (the sampler's own).
	lastIOs uint64
	lastAt  time.Time

	mu   sync.Mutex
	at   []time.Time
	secs []Second
}

func startTimeline(acquire snapshot.Acquirer, dev string) *timeline {
	tl := &timeline{acquire: acquire, dev: dev, stop: make(chan struct{})}
	tl.done.Add(1)
	go func() {
		defer tl.done.Done()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-tl.stop:
				return
			case now := <-tk.C:
				tl.sample(now)
			}
		}
	}()
	return tl
}

// sample records the daemon's last snapshot.
func (tl *timeline) sample(now time.Time) {
	s, release := tl.acquire()
	if s == nil {
		return
	}
	defer release()
	var sec Second
	for _, d := range s.Devices {
		if d.Dev != tl.dev && d.Name != tl.dev {
			continue
		}
		sec.TopLevel, sec.Share = d.TopActiveLevel, d.CappedShare
		sec.TargetUs, sec.ProtectedUs = d.LatencyTarget*1e6, d.ProtectedP99*1e6
		sec.CapacityBps, sec.CapacityIOPS = d.CapacityBps, d.CapacityIOPS
	}
	for i := range s.Workloads {
		w := s.Workloads[i]
		base := w.Cgroup[strings.LastIndexByte(w.Cgroup, '/')+1:]
		switch {
		case strings.HasPrefix(base, "streamer-"):
			sec.StreamerLvl, sec.StreamerBps = w.Level, w.ReadBps
			if tl.lastIOs != 0 && !tl.lastAt.IsZero() && w.ReadIOs >= tl.lastIOs {
				sec.StreamerIOPS = float64(w.ReadIOs-tl.lastIOs) / now.Sub(tl.lastAt).Seconds()
			}
			tl.lastIOs, tl.lastAt = w.ReadIOs, now
			for _, a := range w.Applied {
				if a.Dev == tl.dev || a.Device == tl.dev {
					sec.StreamerCap, sec.StreamerCapIOPS = a.ReadBps, a.ReadIOPS
				}
			}
		case strings.HasPrefix(base, "web-"):
			sec.WebLevel = w.Level
		case strings.HasPrefix(base, "light"):
			sec.LightLevels = append(sec.LightLevels, w.Level)
		}
	}
	slices.Sort(sec.LightLevels)
	tl.mu.Lock()
	tl.at, tl.secs = append(tl.at, now), append(tl.secs, sec)
	tl.mu.Unlock()
}

// finish stops the sampling and returns the seconds, each timed from
// vStart, with the victims' latencies (in completion order, paced at
// webIOPS and lightIOPS each) placed in the second their request was due.
func (tl *timeline) finish(vStart time.Time, web []float64, webIOPS float64, light [][]float64, lightStart []time.Duration, lightIOPS, slowUs float64) []Second {
	close(tl.stop)
	tl.done.Wait()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := make([]Second, len(tl.secs))
	for i, s := range tl.secs {
		// The snapshot seen at tl.at[i] is the tick before it: the second
		// that ended then.
		s.T = math.Floor(tl.at[i].Sub(vStart).Seconds()) - 1
		out[i] = s
	}
	bySec := map[int][]float64{}
	lightBySec := map[int][]float64{}
	for k, us := range web {
		bySec[int(float64(k)/webIOPS)] = append(bySec[int(float64(k)/webIOPS)], us)
	}
	for i, l := range light {
		var at float64 // when tenant i started, s after vStart
		if i < len(lightStart) {
			at = lightStart[i].Seconds()
		}
		for k, us := range l {
			sec := int(at + float64(k)/lightIOPS)
			lightBySec[sec] = append(lightBySec[sec], us)
		}
	}
	for i := range out {
		t := int(out[i].T)
		if t < 0 {
			continue
		}
		if w := bySec[t]; len(w) > 0 {
			q := pooled(w)
			out[i].WebP99Us, out[i].WebMaxUs = q.P99, q.Max
			out[i].VictimsSlow += countAbove(w, slowUs)
		}
		if l := lightBySec[t]; len(l) > 0 {
			q := pooled(l)
			out[i].LightP99Us, out[i].LightMaxUs = q.P99, q.Max
			out[i].VictimsSlow += countAbove(l, slowUs)
		}
	}
	return out
}

func countAbove(us []float64, limit float64) int {
	n := 0
	for _, v := range us {
		if v > limit {
			n++
		}
	}
	return n
}
