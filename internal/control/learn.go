package control

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// Learning the device's unloaded latency and the target from it (the
// package doc's Target): probes, the requests served alone, the baseline.

// dueProbe reports whether a loaded tick at is to probe the unloaded
// latency: it is learned (no fixed Target), and unknown or not seen for
// ProbeEvery; a probe that measured nothing is tried again after a tenth
// of that.
func (c *Controller) dueProbe(at time.Time) bool {
	if c.cfg.Target != 0 {
		return false
	}
	if c.st.Baseline != 0 && at.Sub(c.learnedAt) < c.cfg.ProbeEvery {
		return false
	}
	if c.aloneComing() {
		return false // requests served alone are coming: they tell it
	}
	retry := c.cfg.ProbeEvery
	if c.st.Baseline == 0 {
		retry /= 10
	}
	return c.probeAt.IsZero() || at.Sub(c.probeAt) >= retry
}

// aloneComing reports whether protected requests served alone are coming
// (a first pool of them measured, or half of MinSamples in the last tick):
// learnAlone will learn the unloaded latency from them, no probe needed.
func (c *Controller) aloneComing() bool {
	return c.aloneFirst != 0 || 2*c.aloneLast >= c.cfg.MinSamples
}

// learnAlone pools the protected requests the device served alone
// (Input.Alone) and learns the unloaded latency from them as a probe does:
// the lower p99 of two pools of at least MinSamples each, every pool within
// WindowTicks ticks (a pool that takes longer is dropped: under a
// streamer a request served alone is rare, and the few that are may be
// the fastest, which would learn the target tight). While they come, no
// probe is due (a first pool measured, or half of MinSamples served alone
// in the last tick; a trickle under a streamer does not put one off): a moderate neighbour, whose requests leave the device idle
// most of the time, is never idled to learn the target.
func (c *Controller) learnAlone(in Input) {
	if c.cfg.Target != 0 {
		return
	}
	c.aloneLast = in.Alone.Count()
	if c.aloneLast == 0 && c.alonePool.Count() == 0 && c.aloneFirst == 0 {
		c.aloneTicks = 0
		return
	}
	c.alonePool.Add(&in.Alone)
	c.aloneTicks++
	if c.alonePool.Count() < c.cfg.MinSamples {
		if c.aloneTicks >= WindowTicks {
			c.alonePool, c.aloneTicks, c.aloneFirst = iolat.Hist{}, 0, 0
		}
		return
	}
	m := c.alonePool.Quantile(0.99)
	c.alonePool, c.aloneTicks = iolat.Hist{}, 0
	if c.aloneFirst == 0 {
		c.aloneFirst = m
		return
	}
	c.learn(in.At, min(m, c.aloneFirst))
	c.aloneFirst = 0
}

// learn folds an unloaded measure into the baseline and the target.
func (c *Controller) learn(at time.Time, m time.Duration) {
	if m <= 0 {
		return
	}
	b := c.st.Baseline
	switch {
	case b == 0 || m < b:
		b = m
	default:
		b += time.Duration(ageUp * float64(m-b))
	}
	c.st.Baseline, c.learnedAt = b, at
	if c.cfg.Target == 0 {
		c.st.Target = max(time.Duration(c.cfg.Multiple*float64(b)), c.cfg.MinTarget)
	}
}
