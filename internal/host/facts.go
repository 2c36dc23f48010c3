package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Facts is everything ddiskqos knows about a host, read once. Each part
// carries its own error, so one unreadable file does not hide the rest.
type Facts struct {
	Roots Roots

	Layout    cgroupfs.Layout
	LayoutErr error
	IO        IOHierarchy // Version 0 when there is none
	IOErr     error
	Devices   []Device
	DevErr    error

	PSI    cgroupfs.Pressure
	HasPSI bool // /proc/pressure/io exists
	PSIErr error

	Engine *Engine // nil when the engine was not asked

	Dockerd          ProcLimits
	Self             []Limit // this process (/proc/self/limits)
	SelfErr          error
	PtyMax           Sysctl
	ThreadsMax       Sysctl
	PidMax           Sysctl
	InotifyInstances Sysctl
	InotifyWatches   Sysctl
	Bridges          []Bridge
	BridgesErr       error
}

// Gather reads the facts of the host under r. It asks the Docker engine at
// docker unless that is nil.
func Gather(ctx context.Context, r Roots, docker *DockerEndpoint) Facts {
	f := Facts{Roots: r}
	f.Layout, f.LayoutErr = Layout(r)
	if f.LayoutErr == nil {
		f.IO, f.IOErr = ProbeIOHierarchy(f.Layout)
	} else {
		f.IOErr = fmt.Errorf("%w: %w", cgroupfs.ErrNoIOHierarchy, f.LayoutErr)
	}
	io := f.IO
	if f.IOErr != nil {
		io = IOHierarchy{}
	}
	f.Devices, f.DevErr = BlockDevices(r, io)

	// Missing (no CONFIG_PSI) or refusing reads (psi=0 at boot) is "off",
	// not an error: cgroupfs.ErrNotAvailable.
	f.PSI, f.PSIErr = cgroupfs.ReadHostPressure(r.proc("pressure", "io"))
	f.HasPSI = !errors.Is(f.PSIErr, cgroupfs.ErrNotAvailable)
	if !f.HasPSI {
		f.PSIErr = nil
	}

	if docker != nil {
		e := ProbeEngine(ctx, *docker)
		f.Engine = &e
	}

	f.Dockerd = DockerdLimits(r)
	f.Self, f.SelfErr = ReadProcLimits(r, "self")
	f.PtyMax = ReadSysctl(r, "kernel.pty.max")
	f.ThreadsMax = ReadSysctl(r, "kernel.threads-max")
	f.PidMax = ReadSysctl(r, "kernel.pid_max")
	f.InotifyInstances = ReadSysctl(r, "fs.inotify.max_user_instances")
	f.InotifyWatches = ReadSysctl(r, "fs.inotify.max_user_watches")
	f.Bridges, f.BridgesErr = Bridges(r)
	return f
}
