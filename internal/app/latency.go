package app

import (
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// latencyOptions is the I/O latency stage of `run` and the benchmarks: the
// eBPF sensor (internal/iolat) with the host's BTF; where it cannot run,
// the daemon logs why once and runs without it. With latency: off it is
// never opened.
func latencyOptions(mode config.LatencyMode, roots host.Roots) daemon.LatencyOptions {
	if mode == config.LatencyOff {
		return daemon.LatencyOptions{SysRoot: roots.Sys, Off: true}
	}
	return daemon.LatencyOptions{SysRoot: roots.Sys, Open: func() (daemon.LatencySensor, error) {
		r, err := iolat.OpenReader(iolat.Options{SysRoot: roots.Sys, ProcRoot: roots.Proc})
		if err != nil {
			return nil, err
		}
		return r, nil
	}}
}
