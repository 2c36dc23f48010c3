package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
)

// TestLatencyOff: with the sensor off by configuration the daemon never
// opens it (no BPF is loaded) and the snapshot says it is off, not
// unavailable, with how to turn it on.
func TestLatencyOff(t *testing.T) {
	t.Parallel()
	opened := false
	d, err := New(Options{
		Hierarchy: cgroupfs.Hierarchy{Version: 2, Mount: t.TempDir()}, Source: idleSource{}, Policy: policy.DefaultConfig(),
		NewActuator: func(actuate.Config, []actuate.Original) (Actuator, error) { return nullActuator{}, nil },
		Interval:    time.Second, NoFile: 1 << 20,
		Latency: latency.Options{Off: true, Open: func() (latency.Sensor, error) {
			opened = true
			return nil, errors.New("opened")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d.step()
	d.step()
	l := d.Snapshot().Latency
	if opened {
		t.Error("the sensor was opened although it is off")
	}
	if l == nil || !l.Off || l.Available || !strings.Contains(l.Reason, "off by configuration") || !strings.Contains(l.Fix, "latency: auto") {
		t.Errorf("latency %+v, want off by configuration and how to turn it on", l)
	}
	if strings.Contains(l.Reason, "unavailable") {
		t.Errorf("reason %q: off is a choice, not unavailable", l.Reason)
	}
}
