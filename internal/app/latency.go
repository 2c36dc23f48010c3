package app

import (
	"cmp"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/iolat"
	"github.com/ddiskqos/ddiskqos/internal/sensor/latency"
)

// latencyOptions is the I/O latency stage of `run` and the benchmarks: the
// eBPF sensor (internal/iolat) with the host's BTF; where it cannot run,
// the daemon logs why once and runs without it. When it runs, its per-tick
// read is also the sensing stage's activity source
// (internal/sensor/latency/activity.go): a quiet workload is read at the
// tick after it did I/O, and its counters are otherwise read every 64 s
// (daemon.DefaultActiveQuietMax) instead of every DefaultQuietTicks ticks.
// With latency: off it is never opened (no BPF, no activity source, no
// latency controller).
func latencyOptions(mode config.LatencyMode, roots host.Roots) latency.Options {
	if mode == config.LatencyModeOff {
		return latency.Options{SysRoot: roots.Sys, Off: true}
	}
	return latency.Options{SysRoot: roots.Sys, Open: func() (latency.Sensor, error) {
		r, err := iolat.OpenReader(iolat.Options{SysRoot: roots.Sys, ProcRoot: roots.Proc})
		if err != nil {
			return nil, err
		}
		return r, nil
	}}
}

// activeQuietMax is daemon.Options.ActiveQuietMax for the host: the
// default, unless a block device in use has I/O the eBPF sensor cannot
// see — one without a request queue (zram, brd, pmem, null_blk in bio
// mode), whose bios the cgroup counters count and no block-request
// tracepoint ever shows. Stacked devices (dm, md: their slaves) and NVMe
// multipath heads pass their bios, with their cgroup, to request-based
// disks below, which the sensor sees. Then the polling backstop stays
// short (-1), and the sensor only wakes workloads up. A device with no
// size (an unconfigured zram) does no I/O. Read at start: a device set up
// later is not looked at.
func activeQuietMax(sys string, log *slog.Logger) time.Duration {
	if unseen := requestless(sys); len(unseen) > 0 {
		log.Info("quiet workloads' polling backstop not stretched: block devices whose requests the I/O latency sensor cannot see",
			"devices", unseen)
		return -1
	}
	return 0
}

// requestless lists the block devices under sys (/sys/block) with a size
// and no request queue of their own, stacked ones aside.
func requestless(sys string) []string {
	ents, err := os.ReadDir(filepath.Join(cmp.Or(sys, "/sys"), "block"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		dir := filepath.Join(cmp.Or(sys, "/sys"), "block", e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "size"))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil || n == 0 {
			continue
		}
		if exists(filepath.Join(dir, "mq")) || exists(filepath.Join(dir, "multipath")) {
			continue
		}
		if sl, err := os.ReadDir(filepath.Join(dir, "slaves")); err == nil && len(sl) > 0 {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
