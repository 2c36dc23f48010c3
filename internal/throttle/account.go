package throttle

import (
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
)

// The throttle's account of its own caps, kept in the device sensor beside
// the kernel's counters (devsensor.Caps): a consumer of the device's
// readings — the health tracker — can then tell a rate the throttle
// imposed from the device's.

// capturedFrac: a workload is judged over a window only when capped over
// at least this part of it.
const capturedFrac = 0.8

// account adds what the caps in force since the last period allowed to
// the device sensor's Caps, and every capacityWindow judges whether each
// workload capped over the window ran at its cap (was held back by it).
func (t *Throttle) account(now time.Time) {
	dt := now.Sub(t.lastStep).Seconds()
	first := t.lastStep.IsZero()
	t.lastStep = now
	if first || dt <= 0 {
		t.heldAt = now
		return
	}
	var c devsensor.Caps
	for _, m := range t.watch {
		if m.limits.IsZero() {
			continue
		}
		c.Bytes += float64(m.limits.RBps) * dt
		c.IOs += float64(m.limits.RIOps) * dt
		m.allowB += float64(m.limits.RBps) * dt
		m.allowIO += float64(m.limits.RIOps) * dt
		m.allowSecs += dt
		if !m.active.IsZero() && now.Sub(m.active) < t.cfg.Hold {
			c.CappedSecs = dt
		}
	}
	if win := now.Sub(t.heldAt); win >= capacityWindow {
		held := false
		for _, m := range t.watch {
			capped := m.allowB > 0 || m.allowIO > 0
			if !t.Wants(m.level) || !m.lastOK {
				m.winOK, m.winIOsOK, m.allowB, m.allowIO, m.allowSecs = false, false, 0, 0, 0
				continue
			}
			var ios uint64
			iosOK := false
			if capped || !m.limits.IsZero() {
				ios, iosOK = t.memberIOs(m)
			}
			// Judged only when capped over (nearly) the whole window: what
			// it moved while uncapped part of it is no sign of its cap's
			// holding it back.
			if capped && m.winOK && m.allowSecs >= capturedFrac*win.Seconds() {
				n := -1.0
				if iosOK && m.winIOsOK {
					n = float64(sub(ios, m.winIOs))
				}
				// Each capped workload's own verdict: held back, it stays
				// heavy (load.go) though its rate is the cap's.
				if heldBack(float64(sub(m.last, m.winBytes)), n, m.allowB, m.allowIO) {
					m.heldAt, held = now, true
					t.heldDevAt = now
				}
			}
			m.winBytes, m.winOK, m.winIOs, m.winIOsOK = m.last, true, ios, iosOK
			m.allowB, m.allowIO, m.allowSecs = 0, 0, 0
		}
		if held {
			c.HeldSecs = win.Seconds()
		}
		t.heldAt = now
	}
	if t.sen != nil && c != (devsensor.Caps{}) {
		t.sen.AddCaps(c)
	}
}

// memberIOs is m's requests on the device: on v2 those of the period's
// file read (io.stat has them), else (v1, or the bio counters) from its
// counter files, read now (the fast loop reads the bytes alone).
func (t *Throttle) memberIOs(m *tmember) (uint64, bool) {
	if t.h.Version == 2 && t.bio == nil {
		return m.lastIOs, m.lastOK
	}
	cg, err := t.h.Open(m.cgroup)
	if err != nil {
		return 0, false
	}
	defer cg.Close()
	st, err := cg.ReadIO()
	if err != nil {
		return 0, false
	}
	d := cgroupfs.DeviceIn(st.Devices, t.dev)
	return d.RIOs + d.WIOs, d.RIOs+d.WIOs > 0
}
