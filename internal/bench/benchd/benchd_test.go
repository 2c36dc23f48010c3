package benchd

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

func TestObserverStats(t *testing.T) {
	var o observer
	if st := o.stats(); !reflect.DeepEqual(st, Stats{}) {
		t.Fatalf("no tick: %+v, want zero", st)
	}
	for _, d := range []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond} {
		o.ObserveTick(d)
	}
	o.LevelChange(1, 2, "bytes")
	o.LevelChange(2, 1, "boost")
	o.Error(snapshot.CauseActuate)
	o.Error(snapshot.CauseActuate)
	o.Error(snapshot.CauseSense)
	st := o.stats()
	want := Stats{Ticks: 3, TickMean: 2 * time.Millisecond, TickMax: 3 * time.Millisecond, LevelChanges: 2,
		Errors: map[string]int{"actuate": 2, "sense": 1}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	o.Error(snapshot.CauseSense)
	if st.Errors["sense"] != 1 {
		t.Errorf("returned Errors changed with the observer: %v", st.Errors)
	}
}

// TestStatsFlattened: a report that embeds Stats keeps the flat JSON keys
// the bench reports have always had.
func TestStatsFlattened(t *testing.T) {
	b, err := json.Marshal(struct {
		Mechanism string `json:"mechanism"`
		Stats
	}{"throttle", Stats{Ticks: 2, TickMean: 5, TickMax: 7, LevelChanges: 1, Errors: map[string]int{"scan": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mechanism":"throttle","ticks":2,"tick_mean_ns":5,"tick_max_ns":7,"level_changes":1,"errors":{"scan":1}}`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
}
