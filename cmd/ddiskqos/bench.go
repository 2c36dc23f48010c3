package main

import (
	"fmt"
	"io"
)

const benchKinds = `usage: ddiskqos bench paper|scale|contention [flags]

  paper   the dDiskQoS paper's experiments (Tables 3 and 5) in real Docker
          containers on a loop device of our own, comparing no QoS, BFQ,
          hand-set BFQ weights and ddiskqos; writes a Markdown report, a plot
          and every sample as JSON
  scale   N real cgroups (1,000 to 10,000) under the daemon: CPU, wall time,
          allocations and RSS per tick, scan and churn costs, /metrics time
  contention
          noisy neighbours (sequential and random readers, direct and
          buffered writers) against a web-like reader and cold file reads:
          proves the contention with no QoS, then measures BFQ, static
          weights, a fixed throttle and ddiskqos side by side

Run "ddiskqos bench KIND --help" for flags.
All need root and tear down everything they set up, also on Ctrl-C.
`

// runBench dispatches `ddiskqos bench KIND`.
func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchKinds)
		return 2
	}
	switch args[0] {
	case "paper":
		return runBenchPaper(args[1:], stdout, stderr)
	case "scale":
		return runBenchScale(args[1:], stdout, stderr)
	case "contention":
		return runBenchContention(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchKinds)
		return 0
	}
	fmt.Fprintf(stderr, "ddiskqos bench: unknown benchmark %q\n\n%s", args[0], benchKinds)
	return 2
}
