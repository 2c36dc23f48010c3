package snapshot

import "slices"

// Same reports whether o says what w says, so that a record published for
// an earlier tick can be published again in w's place (see
// Snapshot.Workloads). Labels are left to the caller, which knows whether
// its source handed in a new labels map; Pressure is compared by pointer (a
// new reading is a new value). TestSameComparesEveryField fails when a
// field is added to Workload and not here.
func (w *Workload) Same(o *Workload) bool {
	return w.ID == o.ID && w.Name == o.Name && w.Cgroup == o.Cgroup &&
		w.Level == o.Level && w.Pinned == o.Pinned && w.Exempt == o.Exempt &&
		w.LabelError == o.LabelError && w.BytesInLevel == o.BytesInLevel &&
		w.Allowance == o.Allowance && w.LevelSince.Equal(o.LevelSince) && w.Weight == o.Weight &&
		w.ReadBytes == o.ReadBytes && w.WriteBytes == o.WriteBytes &&
		w.ReadIOs == o.ReadIOs && w.WriteIOs == o.WriteIOs &&
		w.ReadBps == o.ReadBps && w.WriteBps == o.WriteBps &&
		w.Pressure == o.Pressure && w.DTasks == o.DTasks && slices.Equal(w.Applied, o.Applied) &&
		slices.Equal(w.Latency, o.Latency)
}
