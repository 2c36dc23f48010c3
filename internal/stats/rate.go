package stats

// Rates are the changes between two readings of one cgroup, per second.
// A counter that went backwards (the cgroup was removed and made again
// under the same name) counts as no change.
type Rates struct {
	Seconds    float64 `json:"interval_seconds"`
	CPUPercent float64 `json:"cpu_percent"` // of one CPU: 200 is two CPUs busy
	// CPUThrottledPercent is the share of the interval's CFS periods that
	// were throttled.
	CPUThrottledPercent float64 `json:"cpu_throttled_percent"`
	ReadBps             float64 `json:"read_bytes_per_second"`
	WriteBps            float64 `json:"write_bytes_per_second"`
	ReadIOPS            float64 `json:"read_ops_per_second"`
	WriteIOPS           float64 `json:"write_ops_per_second"`
	RxBps               float64 `json:"rx_bytes_per_second"`
	TxBps               float64 `json:"tx_bytes_per_second"`
	PgFaultsPerSec      float64 `json:"pgfaults_per_second"`
}

func delta(prev, cur uint64) float64 {
	if cur < prev {
		return 0
	}
	return float64(cur - prev)
}

// Rate sets cur.Rates from the change since prev, a reading of the same
// cgroup taken before. It does nothing when prev is nil or not earlier.
func Rate(prev, cur *Stats) {
	if prev == nil || cur == nil {
		return
	}
	secs := cur.Time.Sub(prev.Time).Seconds()
	if secs <= 0 {
		return
	}
	r := &Rates{Seconds: secs}
	if prev.CPU != nil && cur.CPU != nil {
		r.CPUPercent = delta(prev.CPU.UsageNs, cur.CPU.UsageNs) / 1e9 / secs * 100
		if pt, ct := prev.CPU.Throttling, cur.CPU.Throttling; pt != nil && ct != nil {
			if p := delta(pt.Periods, ct.Periods); p > 0 {
				r.CPUThrottledPercent = delta(pt.Throttled, ct.Throttled) / p * 100
			}
		}
	}
	if prev.IO != nil && cur.IO != nil {
		pt, ct := ioTotal(prev.IO), ioTotal(cur.IO)
		r.ReadBps = delta(pt.ReadBytes, ct.ReadBytes) / secs
		r.WriteBps = delta(pt.WriteBytes, ct.WriteBytes) / secs
		r.ReadIOPS = delta(pt.ReadOps, ct.ReadOps) / secs
		r.WriteIOPS = delta(pt.WriteOps, ct.WriteOps) / secs
	}
	if prev.Net != nil && cur.Net != nil && prev.Net.Netns == cur.Net.Netns {
		pt, ct := netTotal(prev.Net), netTotal(cur.Net)
		r.RxBps = delta(pt.RxBytes, ct.RxBytes) / secs
		r.TxBps = delta(pt.TxBytes, ct.TxBytes) / secs
	}
	if prev.Memory != nil && cur.Memory != nil {
		r.PgFaultsPerSec = delta(prev.Memory.PgFault, cur.Memory.PgFault) / secs
	}
	cur.Rates = r
}

// ioTotal sums the devices, counting a stacked device's I/O once: as much
// of it as its lower disks also show is taken off again.
func ioTotal(io *IO) Device {
	var t Device
	byDev := map[string]Device{}
	for _, d := range io.Devices {
		t.ReadBytes += d.ReadBytes
		t.WriteBytes += d.WriteBytes
		t.ReadOps += d.ReadOps
		t.WriteOps += d.WriteOps
		byDev[d.Dev] = d
	}
	for _, d := range io.Devices {
		var low Device
		for _, l := range d.Lowers {
			ld := byDev[l]
			low.ReadBytes += ld.ReadBytes
			low.WriteBytes += ld.WriteBytes
			low.ReadOps += ld.ReadOps
			low.WriteOps += ld.WriteOps
		}
		t.ReadBytes -= min(d.ReadBytes, low.ReadBytes)
		t.WriteBytes -= min(d.WriteBytes, low.WriteBytes)
		t.ReadOps -= min(d.ReadOps, low.ReadOps)
		t.WriteOps -= min(d.WriteOps, low.WriteOps)
	}
	return t
}

// netTotal sums the interfaces but loopback, whose traffic never leaves
// the namespace.
func netTotal(n *Net) Interface {
	var t Interface
	for _, i := range n.Interfaces {
		if i.Name == "lo" {
			continue
		}
		t.RxBytes += i.RxBytes
		t.TxBytes += i.TxBytes
		t.RxPackets += i.RxPackets
		t.TxPackets += i.TxPackets
	}
	return t
}

// IOTotal is the I/O of every device together; zero when there is no I/O
// section.
func (s *Stats) IOTotal() Device {
	if s.IO == nil {
		return Device{}
	}
	return ioTotal(s.IO)
}

// NetTotal is the traffic of every interface but loopback together.
func (s *Stats) NetTotal() Interface {
	if s.Net == nil {
		return Interface{}
	}
	return netTotal(s.Net)
}
