//go:build race

package metrics

// raceEnabled: the race detector slows a scrape down several times.
const raceEnabled = true
