// Package workload generates disk I/O and measures it: sequential reads,
// sequential writes or random reads on one file or block device, one request
// at a time or IODepth at a time, optionally paced (IOPS) or syncing every so
// many bytes (FsyncEvery), with per-request latency percentiles from an HDR
// histogram.
//
// It is the load side of ddiskqos's tests and benchmarks: a Spec describes a
// job, Run runs it in-process, and Main is the command "ddiskqos workload",
// which runs as its own process inside FROM scratch containers or under a
// test that must place it into a cgroup before it issues any I/O.
//
// # Running a workload in a cgroup from a test
//
// A cgroup holds whole processes and a test must not move itself, so it
// starts a process that waits (--wait-stdin) until told to go. That process
// can be the test binary itself: TestMain turns it into a workload when the
// environment says so.
//
//	func TestMain(m *testing.M) {
//		workload.MaybeRunFromEnv() // exits here in the re-executed child
//		os.Exit(m.Run())
//	}
//
//	func TestThrottle(t *testing.T) {
//		spec := workload.Spec{Path: dev, Op: workload.OpRead, Direct: true, Bytes: 64 << 20}
//		args := append([]string{"--wait-stdin", "--json"}, spec.Args()...)
//		p, err := workload.Start(ctx, os.Args[0],
//			[]string{workload.EnvMain + "=1"}, args)
//		// ... write p.Pid() to the cgroup's cgroup.procs ...
//		err = p.Go()
//		res, err := p.Wait()
//	}
//
// The child prints "ready <pid>", blocks on stdin, runs the job after the
// first line and prints its Result as JSON. Closing stdin instead ends it
// without I/O. With "ddiskqos" as exe, put "workload" first in args.
package workload
