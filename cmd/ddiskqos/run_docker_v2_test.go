package main

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"
)

// The Docker-on-v2 test reads the level changes from the daemon's log:
// lines as the daemon's slog text handler writes them, other workloads'
// and other messages skipped, quoted values unquoted.
func TestTransitionsFromDaemonLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	change := func(name, from, to, reason string) {
		log.Info("level change", "workload", name, "id", "abc", "from", from, "to", to, "reason", reason, "bytes_in_level", 2097152)
	}
	change("streamer", "none", "1", "new")
	change("idle", "none", "1", "new")
	log.Info("applied", "workload", "streamer", "from", "x", "to", "y")
	change("streamer", "1", "2", "allowance-used")
	log.With("extra", "a b").Info("level change", "workload", "streamer", "from", "2", "to", "3", "reason", "allowance used")
	change("stream", "3", "4", "allowance-used")

	if got, want := transitions(buf.String(), "streamer"), []string{"none>1 new", "1>2 allowance-used", "2>3 allowance used"}; !slices.Equal(got, want) {
		t.Errorf("streamer: %q, want %q\nlog:\n%s", got, want, buf.String())
	}
	if got, want := transitions(buf.String(), "idle"), []string{"none>1 new"}; !slices.Equal(got, want) {
		t.Errorf("idle: %q, want %q", got, want)
	}
	if got := transitions(buf.String(), "nobody"); got != nil {
		t.Errorf("nobody: %q, want none", got)
	}
}

func TestIsSubsequence(t *testing.T) {
	order := []uint64{0, 1000, 500, 250, 100}
	for _, c := range []struct {
		got  []uint64
		want bool
	}{
		{nil, true},
		{[]uint64{0, 1000, 500, 250, 100}, true},
		{[]uint64{0, 1000, 100}, true},
		{[]uint64{100}, true},
		{[]uint64{1000, 500, 1000}, false}, // went back up
		{[]uint64{0, 100, 250}, false},
		{[]uint64{300}, false}, // not a level's weight
		{[]uint64{1000, 1000}, false},
	} {
		if got := isSubsequence(c.got, order); got != c.want {
			t.Errorf("isSubsequence(%v, %v) = %v, want %v", c.got, order, got, c.want)
		}
	}
}
