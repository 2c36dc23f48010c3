package policy

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// fuzzLabels are the label sets a fuzzed observation picks from.
var fuzzLabels = []map[string]string{
	nil,
	{},
	{LabelLevel: "1"},
	{LabelLevel: "2"},
	{LabelLevel: "3"},
	{LabelLevel: "4"},
	{LabelLevel: "0"},
	{LabelLevel: "x"},
	{LabelExempt: "true"},
	{LabelExempt: "false"},
	{LabelExempt: ""},
	{LabelExempt: "true", LabelLevel: "2"},
	{LabelExempt: "no", LabelLevel: "9"},
	{LabelExempt: "0", LabelLevel: "4"},
}

// FuzzObserve drives an Engine with a sequence of operations decoded from
// the input, 4 bytes each: observe (with a delta, a time step and labels),
// forget, reconfigure, restore. After every step the invariants hold: a
// workload is at a level 1..4 unless exempt, its bytes at levels 1-3 stay
// below the allowance unless pinned, transitions chain, views and totals
// agree, and nothing panics.
func FuzzObserve(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 1, 255, 3, 0, 1, 0, 200, 0, 1, 9, 8})
	f.Add([]byte{0, 2, 10, 2, 1, 2, 3, 9, 4, 2, 0, 0, 0, 2, 1, 1})
	f.Add([]byte{5, 0, 200, 7, 0, 0, 50, 20, 6, 3, 4, 1, 0, 3, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := Config{Allowances: [4]uint64{3, 5, 7, 11}, Weights: [4]uint16{1000, 500, 250, 100}, BoostAfter: 10 * time.Second}
		e := newEngine(t, cfg)
		now := t0
		if len(ops) > 4*256 { // longer runs find nothing new and slow minimizing
			ops = ops[:4*256]
		}
		for len(ops) >= 4 {
			kind, idb, a, b := ops[0], ops[1], ops[2], ops[3]
			ops = ops[4:]
			id := "w" + strconv.Itoa(int(idb%6))
			switch kind % 8 {
			case 0, 1, 2, 3: // observe
				// b's low bits step the clock (possibly back), its high
				// bits pick the labels; a is the delta, sometimes huge.
				now = now.Add(time.Duration(int(b%16)-2) * time.Second)
				delta := uint64(a)
				if a >= 250 {
					delta = math.MaxUint64 - uint64(255-a)
				}
				prev, known := e.Get(id)
				d := e.Observe(now, id, delta, fuzzLabels[int(b>>4)%len(fuzzLabels)])
				checkDecision(t, e, id, now, d)
				// Every change of standing is explained, starting from
				// where the workload was.
				switch trs := d.Transitions(); {
				case !known && (len(trs) == 0 || trs[0].From != LevelNone):
					t.Fatalf("first sight of %s: %+v", id, trs)
				case known && len(trs) == 0 && (prev.Level != d.Level || prev.Pinned != d.Pinned || prev.Exempt != d.Exempt):
					t.Fatalf("%s moved from %+v to %+v without a transition", id, prev, d)
				case known && len(trs) > 0 && trs[0].From != prev.Level:
					t.Fatalf("%s was at %v, first transition %+v", id, prev.Level, trs[0])
				}
			case 4:
				e.Forget(id)
			case 5: // reconfigure, valid or not
				c := e.Config()
				c.Allowances[a%4] = uint64(b)
				c.Weights[b%4] = uint16(a) * 4
				c.BoostAfter = time.Duration(int(b)-10) * time.Second
				before := e.Config()
				if err := e.Reconfigure(c); err != nil && e.Config() != before {
					t.Fatalf("rejected config %+v applied: %v", c, err)
				}
			case 6: // restore, valid or not
				v := View{ID: id, Level: Level(a % 6), Pinned: b&1 != 0, Exempt: b&2 != 0,
					BytesInLevel: uint64(b), EnteredAt: now.Add(time.Duration(int(a)-128) * time.Second)}
				if v.Exempt {
					v.Level = LevelNone
				}
				_ = e.Restore(v)
			case 7:
				now = now.Add(time.Duration(a) * time.Minute)
			}
			checkEngine(t, e)
		}
	})
}

// checkEngine checks what must hold for every workload at any time.
func checkEngine(t *testing.T, e *Engine) {
	t.Helper()
	var want Totals
	vs := e.AppendViews(nil)
	for i, v := range vs {
		if i > 0 && vs[i-1].ID >= v.ID {
			t.Fatalf("views out of order: %q, %q", vs[i-1].ID, v.ID)
		}
		if v.Exempt != (v.Level == LevelNone) || (!v.Exempt && !v.Level.Valid()) || (v.Exempt && v.Pinned) {
			t.Fatalf("bad standing %+v", v)
		}
		if !v.Exempt && !v.Pinned && v.Level < Level4 && v.BytesInLevel > v.Allowance {
			t.Fatalf("%+v holds more than its allowance", v)
		}
		want.Workloads++
		want.Bytes = satAdd(want.Bytes, v.TotalBytes)
		switch {
		case v.Exempt:
			want.Exempt++
			continue
		case v.Pinned:
			want.Pinned++
		}
		want.PerLevel[v.Level-1]++
	}
	if got := e.Totals(); got != want || e.Len() != len(vs) {
		t.Fatalf("Totals %+v, Len %d; views say %+v", got, e.Len(), want)
	}
}
