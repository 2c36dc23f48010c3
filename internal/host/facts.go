package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
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
	// DataRoot is where the engine's RootDir lives; nil when the engine
	// was not asked, did not answer, or named no root dir.
	DataRoot *DataRoot
	// RT is cpu.rt_runtime_us of the containers' parent; nil unless the
	// engine answered and a v1 cpu hierarchy is mounted.
	RT *RTRuntime
	// Overlay is whether the kernel offers the overlay filesystem
	// (/proc/filesystems), which Docker's overlay2 driver needs.
	Overlay    bool
	OverlayErr error
	// DeviceGlobs are the daemon's devices patterns (run's --devices); set
	// by the caller, they decide which devices count as shaped.
	DeviceGlobs []string

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
	// Latency is whether the I/O latency sensor runs here (ProbeLatency).
	Latency *LatencyFacts
}

// GatherOptions are what GatherWith is told of the daemon's configuration.
type GatherOptions struct {
	// LatencyOff is the daemon's latency: off: the I/O latency sensor is
	// not probed (no BPF is loaded), and latency.ebpf says it is off.
	LatencyOff bool
	// Mechs are the mechanisms' parameters as the daemon's configuration
	// sets them: what runs beside each device's main mechanism.
	Mechs mech.Params
}

// Gather reads the facts of the host under r. It asks the Docker engine at
// docker unless that is nil.
func Gather(ctx context.Context, r Roots, docker *DockerEndpoint) Facts {
	return GatherWith(ctx, r, docker, GatherOptions{})
}

// GatherWith is Gather for a daemon configured as o says.
func GatherWith(ctx context.Context, r Roots, docker *DockerEndpoint, o GatherOptions) Facts {
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
	f.Devices, f.DevErr = BlockDevices(r, io, o.Mechs)

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
	if e := f.Engine; e != nil && e.Reachable && e.Error == "" {
		if e.RootDir != "" {
			// The root dir is a path in dockerd's mount namespace.
			mi := r.proc(strconv.Itoa(f.Dockerd.PID), "mountinfo")
			if _, err := os.Stat(mi); f.Dockerd.PID == 0 || err != nil {
				mi = r.MountinfoPath()
			}
			dr := ResolveDataRoot(r, mi, e.RootDir, f.Devices)
			f.DataRoot = &dr
		}
		if f.LayoutErr == nil {
			if cpu, ok := f.Layout.V1Controller("cpu"); ok {
				rt := ReadRTRuntime(cpu.Mountpoint, containersParent(e.CgroupDriver))
				f.RT = &rt
			}
		}
	}
	f.Overlay, f.OverlayErr = hasFilesystem(r, "overlay")
	f.Self, f.SelfErr = ReadProcLimits(r, "self")
	f.PtyMax = ReadSysctl(r, "kernel.pty.max")
	f.ThreadsMax = ReadSysctl(r, "kernel.threads-max")
	f.PidMax = ReadSysctl(r, "kernel.pid_max")
	f.InotifyInstances = ReadSysctl(r, "fs.inotify.max_user_instances")
	f.InotifyWatches = ReadSysctl(r, "fs.inotify.max_user_watches")
	f.Bridges, f.BridgesErr = Bridges(r)
	if o.LatencyOff {
		f.Latency = &LatencyFacts{Off: true}
	} else {
		f.Latency = ProbeLatency(r)
	}
	return f
}
