package contention

import (
	"fmt"
	"math"
	"slices"
)

// FrontierPoint is one configuration's point: the streamer's share while
// the victims ran, and a victim's p99 ÷ idle.
type FrontierPoint struct {
	Config Config  `json:"config"`
	Share  float64 `json:"share"`
	P99    float64 `json:"p99_x_idle"`
}

// FrontierVerdict says whether ddiskqos's point lies beyond the static
// caps' frontier for one victim: a lower p99 than the frontier at its
// share, the frontier interpolated linearly between the two caps whose
// shares bracket it (above the largest cap's share, that cap's p99: a
// lower p99 at a higher share beats it; below the smallest cap's share
// the frontier is not measured and the point is not beyond).
type FrontierVerdict struct {
	Victim   string          `json:"victim"`
	DDiskQoS FrontierPoint   `json:"ddiskqos"`
	Caps     []FrontierPoint `json:"caps"` // by share
	// Frontier is the frontier's p99 ÷ idle at ddiskqos's share, NaN
	// (JSON null via Defined) when not measured there.
	Frontier float64 `json:"-"`
	Defined  bool    `json:"defined"`
	Lo, Hi   Config  `json:"-"`
	Between  string  `json:"between"`
	Beyond   bool    `json:"beyond"`
}

// Frontier judges point d against the caps' points.
func Frontier(victim string, d FrontierPoint, caps []FrontierPoint) FrontierVerdict {
	v := FrontierVerdict{Victim: victim, DDiskQoS: d, Frontier: math.NaN()}
	for _, c := range caps {
		if !math.IsNaN(c.Share) && !math.IsNaN(c.P99) {
			v.Caps = append(v.Caps, c)
		}
	}
	slices.SortFunc(v.Caps, func(a, b FrontierPoint) int {
		switch {
		case a.Share < b.Share:
			return -1
		case a.Share > b.Share:
			return 1
		}
		return 0
	})
	cs := v.Caps
	if len(cs) == 0 || math.IsNaN(d.Share) || math.IsNaN(d.P99) {
		v.Between = "no points"
		return v
	}
	switch {
	case d.Share < cs[0].Share:
		v.Between = fmt.Sprintf("below the smallest cap's share (%s, %.0f %%): not measured", cs[0].Config, cs[0].Share*100)
		return v
	case d.Share >= cs[len(cs)-1].Share:
		l := cs[len(cs)-1]
		v.Frontier, v.Lo, v.Hi = l.P99, l.Config, l.Config
		v.Between = fmt.Sprintf("at or above the largest cap's share (%s, %.0f %%)", l.Config, l.Share*100)
	default:
		for i := 1; i < len(cs); i++ {
			lo, hi := cs[i-1], cs[i]
			if d.Share > hi.Share {
				continue
			}
			f := 0.0
			if hi.Share > lo.Share {
				f = (d.Share - lo.Share) / (hi.Share - lo.Share)
			}
			v.Frontier, v.Lo, v.Hi = lo.P99+f*(hi.P99-lo.P99), lo.Config, hi.Config
			v.Between = fmt.Sprintf("between %s (%.0f %%) and %s (%.0f %%)", lo.Config, lo.Share*100, hi.Config, hi.Share*100)
			break
		}
	}
	v.Defined = true
	v.Beyond = d.P99 < v.Frontier
	return v
}

// Dominators are the peers whose point dominates d: at least d's share and
// at most its p99, better on one of the two (the bar: no peer gives
// both a lower victim p99 and a larger share). Points without a value are
// skipped.
func Dominators(d FrontierPoint, peers []FrontierPoint) []FrontierPoint {
	var out []FrontierPoint
	if math.IsNaN(d.Share) || math.IsNaN(d.P99) {
		return nil
	}
	for _, p := range peers {
		if math.IsNaN(p.Share) || math.IsNaN(p.P99) {
			continue
		}
		if p.Share >= d.Share && p.P99 <= d.P99 && (p.Share > d.Share || p.P99 < d.P99) {
			out = append(out, p)
		}
	}
	return out
}
