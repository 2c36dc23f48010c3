// Command probe is run inside the test VM by cmd/vmexec's tests.
//
//	probe report   print a JSON report of what the VM looks like, exit 0
//	probe exit N   print a line to stdout and one to stderr, exit N
//	probe sleep D  sleep for duration D
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Report is decoded by cmd/vmexec's test.
type Report struct {
	Cwd             string
	InVM            string
	Disk            string
	Token           string
	TmpDir          string
	TmpWritable     bool
	Controllers     string
	SubtreeControl  string
	PressureIO      bool
	DiskIsBlock     bool
	SchedulerBefore string
	SchedulerAfter  string
	Errors          []string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe report|exit N|sleep D")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "report":
		report()
	case "exit":
		n, _ := strconv.Atoi(os.Args[2])
		fmt.Println("probe stdout")
		fmt.Fprintln(os.Stderr, "probe stderr")
		os.Exit(n)
	case "sleep":
		d, _ := time.ParseDuration(os.Args[2])
		time.Sleep(d)
	}
}

func report() {
	var r Report
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
		return strings.TrimSpace(string(b))
	}
	r.Cwd, _ = os.Getwd()
	r.InVM = os.Getenv("DDISKQOS_IN_VM")
	r.Disk = os.Getenv("DDISKQOS_VM_DISK")
	r.Token = os.Getenv("DDISKQOS_PROBE_TOKEN")
	r.TmpDir = os.TempDir()
	if err := os.WriteFile(filepath.Join(r.TmpDir, "probe"), []byte("x"), 0o644); err == nil {
		r.TmpWritable = true
	}
	r.Controllers = read("/sys/fs/cgroup/cgroup.controllers")
	r.SubtreeControl = read("/sys/fs/cgroup/cgroup.subtree_control")
	_, err := os.Stat("/proc/pressure/io")
	r.PressureIO = err == nil
	if fi, err := os.Stat(r.Disk); err == nil {
		r.DiskIsBlock = fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
	}
	sched := "/sys/block/" + filepath.Base(r.Disk) + "/queue/scheduler"
	r.SchedulerBefore = read(sched)
	if err := os.WriteFile(sched, []byte("bfq"), 0); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.SchedulerAfter = read(sched)
	json.NewEncoder(os.Stdout).Encode(r)
	fmt.Fprintln(os.Stderr, "probe report done")
}
