package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/view"
)

// daemonFlags are the flags of the commands that ask the running daemon
// (status, top): where its API is and how long to wait for an answer.
type daemonFlags struct {
	addr    string
	timeout time.Duration
}

func (d *daemonFlags) declare(f *cli.FlagSet, timeoutUsage string) {
	f.StringVar(&d.addr, "addr", api.DefaultAddr, "HOST:PORT", "the daemon's API: HOST:PORT or an http:// URL (what \"ddiskqos run --listen\" was given)")
	f.DurationVar(&d.timeout, "timeout", 10*time.Second, "DUR", timeoutUsage)
}

// client checks the flags and returns the daemon's API client, or the
// usage error.
func (d *daemonFlags) client() (*api.Client, error) {
	if d.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration", d.timeout)
	}
	c, err := api.NewClient(d.addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %v", d.addr, err)
	}
	return c, nil
}

// statusOptions are the flags of "ddiskqos status".
type statusOptions struct {
	daemonFlags
	level, name, sort string
	json              bool
}

var statusCmd = &cli.Cmd[statusOptions]{
	Info: cli.Info{
		Name:    "status",
		Summary: "what the running daemon decided, per workload",
		Description: `Asks the running daemon ("ddiskqos run") for the state of its last tick and
prints every workload it manages, the level the feedback queue put it in and
what that means on each disk, then the disks.

Every container starts at level 1, the best served. Each level allows a
number of bytes (its allowance); a container that moves more is demoted one
level, down to level 4, where bulk streams share what is left. Quiet
containers climb back up. A label can pin a container to a level or exempt
it from QoS.

A "DEGRADED:" line under the first line names each reason the daemon is
not fully working (why its /healthz answers 503): a loop that stopped
ticking, a state file it cannot save (no new knob is written meanwhile),
a workload source that lost its backend (the Docker engine: containers
are neither discovered nor released until it is back).`,
		More: view.StatusColumns,
		Examples: `  ddiskqos status
  ddiskqos status --sort rate              # the heaviest I/O first
  ddiskqos status --level 4                # who is in the bulk level
  ddiskqos status --json | jq '.workloads[] | {name, level, bytes_in_level}'`,
		Exit: `  0  printed
  1  the daemon is not reachable, not ready or answered an error
  2  usage error`,
	},
	Flags: func(o *statusOptions, f *cli.FlagSet) {
		o.declare(f, "give up on the daemon after this long")
		f.BoolVar(&o.json, "json", "print the daemon's JSON snapshot unchanged (a stable schema) instead of tables")
		f.StringVar(&o.level, "level", "", "N", "show only workloads at this level: 1..4, or 0 for exempt", cli.Values("1", "2", "3", "4", "0"))
		f.StringVar(&o.name, "name", "", "SUBSTR", "show only workloads whose name contains SUBSTR")
		f.StringVar(&o.sort, "sort", "name", "name|level|rate", "order of the workloads: name, level (best served first, exempt last), or rate (most I/O first)")
	},
}

// runStatus is `ddiskqos status`.
func runStatus(args []string, stdout, stderr io.Writer) int {
	return statusMain(args, stdout, stderr, time.Now)
}

// statusMain is runStatus with the clock the tick age is measured against.
func statusMain(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	o, _, code, ok := statusCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	bad := func(format string, a ...any) int { return cli.Usagef(stderr, "ddiskqos status", format, a...) }
	if !slices.Contains(view.Sorts, o.sort) {
		return bad("--sort %q: want one of %s", o.sort, strings.Join(view.Sorts, ", "))
	}
	if o.level != "" {
		if n, err := strconv.Atoi(o.level); err != nil || n < 0 || n > 4 {
			return bad("--level %q: want 1..4, or 0 for exempt", o.level)
		}
	}
	client, err := o.client()
	if err != nil {
		return bad("%v", err)
	}

	q := url.Values{}
	if o.level != "" {
		q.Set("level", o.level)
	}
	if o.name != "" {
		q.Set("name", o.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	body, err := client.WorkloadsJSON(ctx, q)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos status: %v\n", view.Explain(err, o.addr))
		return 1
	}
	if o.json {
		if _, err := stdout.Write(body); err != nil {
			fmt.Fprintf(stderr, "ddiskqos status: %v\n", err)
			return 1
		}
		return 0
	}
	var snap snapshot.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		fmt.Fprintf(stderr, "ddiskqos status: the answer of %s is not a ddiskqos snapshot: %v\n", o.addr, err)
		return 1
	}
	view.Status(stdout, &snap, view.Order(snap.Workloads, o.sort), o.addr, view.FilterText(o.level, o.name), now())
	return 0
}
