// Package devhealth judges a block device's health from its own counters
// (/sys/block/<dev>/stat): a burst-credit model (the token bucket cloud
// volumes such as AWS gp2 sell: a burst rate while credits last, a baseline
// after) that estimates the balance, the drain rate and the time until the
// bucket is empty, and a detector that needs no configuration: the
// deliverable rate falling to a steady floor while demand stays high is a
// device throttling (a burst balance exhausted), and is reported as a
// state: normal → draining → exhausted → recovering. A floor the daemon's
// own caps imposed (a workload held back at its cap, devsensor.Caps) is
// never taken for the device's.
//
// Everything here is pure: samples and times come in as values.
package devhealth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bucket is a burst-credit token bucket in one unit (I/Os or bytes): while
// the balance is above zero the device delivers up to Burst per second;
// every unit done costs one credit; credits come back at Baseline per
// second, up to Size. Zero Size means no bucket in this unit.
type Bucket struct {
	Baseline float64 `json:"baseline"` // per second
	Burst    float64 `json:"burst"`    // per second, while credit lasts
	Size     float64 `json:"size"`     // credits (units)
}

// Enabled reports whether the bucket models anything: a size, and a burst
// above the baseline.
func (b Bucket) Enabled() bool { return b.Size > 0 && b.Burst > b.Baseline }

// BurstFor is how long a full bucket lasts at the burst rate.
func (b Bucket) BurstFor() float64 {
	if !b.Enabled() {
		return 0
	}
	return b.Size / (b.Burst - b.Baseline)
}

// Model is a device's burst-credit configuration: an IOPS bucket, a bytes/s
// bucket, or both (whichever runs out first limits the device).
type Model struct {
	Name  string `json:"name,omitempty"` // the preset's, or "plain"
	IOPS  Bucket `json:"iops"`
	Bytes Bucket `json:"bytes"`
}

// Enabled reports whether either bucket models anything.
func (m Model) Enabled() bool { return m.IOPS.Enabled() || m.Bytes.Enabled() }

const (
	mib = 1 << 20
	gib = 1 << 30
	tib = 1 << 40
)

// Presets names the vendor presets Preset knows, in a stable order.
var Presets = []string{"aws-gp2", "aws-st1", "aws-sc1", "azure-premium-p1-p20"}

// Preset is the published burst model of a cloud volume type of size bytes:
//
//   - aws-gp2 (Amazon EBS General Purpose SSD, gp2): baseline 3 IOPS per
//     GiB, at least 100, at most 16,000; burst to 3,000 IOPS from a bucket
//     of 5.4 million I/O credits (volumes of 1,000 GiB and more have a
//     baseline of 3,000 or more and never burst).
//   - aws-st1 (Throughput Optimized HDD): baseline 40 MiB/s per TiB, burst
//     250 MiB/s per TiB, both at most 500 MiB/s; the bucket holds 1 TiB of
//     credit per TiB of volume.
//   - aws-sc1 (Cold HDD): baseline 12 MiB/s per TiB (at most 192), burst
//     80 MiB/s per TiB (at most 250), 1 TiB of credit per TiB.
//   - azure-premium-p1-p20 (Azure Premium SSD P1–P20, credit-based
//     bursting): the tier's provisioned IOPS and MB/s as baseline, bursts
//     to 3,500 IOPS and 170 MB/s, and a full bucket lasts 30 minutes of
//     burst.
//
// GCP persistent disks publish no credit bucket and have no preset; give
// any other device the plain form (Plain).
func Preset(name string, size int64) (Model, error) {
	if size <= 0 {
		return Model{}, fmt.Errorf("burst model %s: volume size %d: must be positive", name, size)
	}
	gibs := float64(size) / gib
	tibs := float64(size) / tib
	m := Model{Name: name}
	switch name {
	case "aws-gp2":
		base := math.Min(math.Max(3*math.Ceil(gibs), 100), 16000)
		m.IOPS = Bucket{Baseline: base, Burst: math.Max(3000, base), Size: 5.4e6}
	case "aws-st1":
		m.Bytes = Bucket{Baseline: math.Min(40*mib*tibs, 500*mib), Burst: math.Min(250*mib*tibs, 500*mib), Size: tibs * tib}
	case "aws-sc1":
		m.Bytes = Bucket{Baseline: math.Min(12*mib*tibs, 192*mib), Burst: math.Min(80*mib*tibs, 250*mib), Size: tibs * tib}
	case "azure-premium-p1-p20":
		// The smallest tier at least as large as the disk.
		tiers := []struct {
			gib       float64
			iops, mbs float64
		}{{4, 120, 25}, {8, 120, 25}, {16, 120, 25}, {32, 120, 25}, {64, 240, 50},
			{128, 500, 100}, {256, 1100, 125}, {512, 2300, 150}}
		i := 0
		for i < len(tiers) && tiers[i].gib < gibs {
			i++
		}
		if i == len(tiers) {
			return Model{}, fmt.Errorf("burst model %s: volume of %.0f GiB: credit-based bursting is for P1–P20 (up to 512 GiB)", name, gibs)
		}
		t := tiers[i]
		const burstSecs = 30 * 60
		m.IOPS = Bucket{Baseline: t.iops, Burst: 3500, Size: (3500 - t.iops) * burstSecs}
		m.Bytes = Bucket{Baseline: t.mbs * 1e6, Burst: 170e6, Size: (170e6 - t.mbs*1e6) * burstSecs}
	default:
		return Model{}, fmt.Errorf("burst model %q: unknown preset (known: %s, or the plain form)", name, strings.Join(Presets, ", "))
	}
	return m, nil
}

// Plain is a model from explicit figures; a zero bucket is unused.
func Plain(iops, bytes Bucket) (Model, error) {
	m := Model{Name: "plain", IOPS: iops, Bytes: bytes}
	var errs []error
	for _, c := range []struct {
		unit string
		b    Bucket
	}{{"iops", iops}, {"bytes", bytes}} {
		b := c.b
		if b == (Bucket{}) {
			continue
		}
		if b.Baseline < 0 || b.Burst <= 0 || b.Size <= 0 || math.IsNaN(b.Baseline+b.Burst+b.Size) || math.IsInf(b.Baseline+b.Burst+b.Size, 0) {
			errs = append(errs, fmt.Errorf("burst model %s bucket %s: want baseline >= 0, burst > 0, size > 0", c.unit, fmtBucket(b)))
		} else if b.Burst <= b.Baseline {
			errs = append(errs, fmt.Errorf("burst model %s bucket %s: burst must exceed the baseline", c.unit, fmtBucket(b)))
		}
	}
	if len(errs) == 0 && !m.Enabled() {
		errs = append(errs, errors.New("burst model: neither an iops nor a bytes bucket given"))
	}
	return m, errors.Join(errs...)
}

func fmtBucket(b Bucket) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return "baseline=" + f(b.Baseline) + " burst=" + f(b.Burst) + " size=" + f(b.Size)
}

// ParseModel parses the configuration form of a model:
//
//	aws-gp2:SIZE                       a preset for a volume of SIZE bytes
//	iops=BASE/BURST/BUCKET             plain, I/Os per second and I/O credits
//	bps=BASE/BURST/BUCKET              plain, bytes per second and bytes
//	iops=.../.../...,bps=.../.../...   both
//
// size parses SIZE (the config's size syntax, e.g. bytesize.Parse).
func ParseModel(s string, size func(string) (int64, error)) (Model, error) {
	s = strings.TrimSpace(s)
	if name, sz, ok := strings.Cut(s, ":"); ok && !strings.Contains(name, "=") {
		n, err := size(sz)
		if err != nil {
			return Model{}, fmt.Errorf("burst model %q: size: %w", s, err)
		}
		return Preset(name, n)
	}
	var iops, bps Bucket
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		var dst *Bucket
		switch {
		case ok && k == "iops":
			dst = &iops
		case ok && k == "bps":
			dst = &bps
		default:
			return Model{}, fmt.Errorf("burst model %q: %q: want PRESET:SIZE, iops=BASE/BURST/BUCKET or bps=BASE/BURST/BUCKET", s, part)
		}
		f := strings.Split(v, "/")
		if len(f) != 3 {
			return Model{}, fmt.Errorf("burst model %q: %q: want three numbers BASE/BURST/BUCKET", s, part)
		}
		var x [3]float64
		for i := range f {
			var err error
			if x[i], err = strconv.ParseFloat(f[i], 64); err != nil {
				return Model{}, fmt.Errorf("burst model %q: %q: %q is not a number", s, part, f[i])
			}
		}
		*dst = Bucket{Baseline: x[0], Burst: x[1], Size: x[2]}
	}
	m, err := Plain(iops, bps)
	if err != nil {
		return Model{}, fmt.Errorf("burst model %q: %w", s, err)
	}
	return m, nil
}
