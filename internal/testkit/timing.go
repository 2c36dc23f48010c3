package testkit

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// WaitFor polls cond every millisecond for up to limit and returns how long
// it took, failing the test with what when it did not come true.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// Spread formats the durations of repeated runs for a test's log as
// "median m (min a, max b, n runs)".
func Spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "no runs"
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	return fmt.Sprintf("median %s (min %s, max %s, %d runs)", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]), len(s))
}

// Median is the median of ds (the upper one of an even count); ds must not
// be empty.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
