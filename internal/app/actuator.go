package app

import (
	"log/slog"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
)

// The actuator's and the mechanisms' constructors and probes, as Build
// calls them: the one place it chooses how levels are written.

// newActuator is how the daemon's actuator is made for cfg.Actuator: nil
// for the cgroup files (the daemon's own default, actuate.New), the Docker
// Engine API through the pipeline's one client. The only place Build calls
// an actuator's constructor.
func newActuator(cfg config.Config, engine func() (*client.Client, error)) (func(actuate.Config, []actuate.Original) (daemon.Actuator, error), error) {
	if cfg.Actuator != config.ActuatorDocker {
		return nil, nil
	}
	cli, err := engine()
	if err != nil {
		return nil, err
	}
	return func(ac actuate.Config, adopted []actuate.Original) (daemon.Actuator, error) {
		return actuate.NewDocker(ac, cli, adopted)
	}, nil
}

// alsoOn chooses the mechanisms that run on d beside its own: the throttle
// beside a scheduler's weight (throttle_with_weights), and each mechanism
// the configuration turns on (level_limits) where its probe lets it (else
// a WARN says why not).
func alsoOn(cfg config.Config, p mech.Params, h cgroupfs.Hierarchy, d actuate.Device, log *slog.Logger) []mech.Name {
	var also []mech.Name
	if cfg.ThrottleWithWeights && (d.Mech == mech.BFQWeight || d.Mech == mech.CFQWeight) {
		also = append(also, mech.Throttle)
	}
	for _, m := range mech.All() {
		if m.Role != mech.Target || m.On == nil || !m.On(p) {
			continue
		}
		env := mech.Env{H: h, Dev: d.Dev, Name: d.Name, Scheduler: d.Scheduler, Mechs: append([]mech.Name{d.Mech}, also...)}
		if v := m.Probe(env); !v.OK {
			if log != nil {
				log.Warn("mechanism not in force on this device", "mechanism", m.Name, "device", d.Name, "reason", v.Reason)
			}
			continue
		}
		also = append(also, m.Name)
	}
	return also
}
