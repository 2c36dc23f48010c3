package app

import (
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
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
