package view

// The legends of what status and top show, for their --help and the man
// page: next to the code that draws the columns, so that both change
// together.

// StatusColumns explains the columns of `ddiskqos status`.
const StatusColumns = `Columns:
  NAME, ID       the container (ID cut to 12 characters)
  LEVEL          1 (best served) .. 4; "pinned" when a label fixes it,
                 "exempt" when QoS leaves it alone, "!label" when its label
                 is wrong (see the notes below the table)
  ACTION         what ddiskqos does to it now on the disks it used (its
                 own counters show I/O there): "cap 64MiB/s" (a throttle
                 limit in force; r.../w... when read and write differ),
                 "weight 500" (its share of the disk, 10..1000), "no cap"
                 (throttle, nothing in force now); one or two disks named,
                 more counted; "no I/O yet" when it used none (what is set
                 on a disk it never touched does nothing to it), "-" exempt
  IN-LEVEL       bytes moved since it entered its level / the level's
                 allowance ("-": no allowance, the last level)
  READ/s WRITE/s over the last tick
  PRESSURE       share of the last 10 s its tasks stalled on I/O (PSI
                 "some" avg10; cgroup v2 only)
  MECHANISM      per disk, how the level is applied: bfq-weight,
                 iocost-weight, cfq-weight (a share of the disk) or throttle
                 (a limit); "!" marks a failure to apply (see the notes)
  HEALTH         per disk, from its own counters: normal, draining
                 (spending burst credit), exhausted (a steady floor while
                 busy: burst credit exhausted?) or recovering; with a burst
                 model (health.models) the balance and the time until empty`

// TopKeys are the keys of `ddiskqos top`.
const TopKeys = `Keys:
  r  sort by rate (most I/O first)     l  by level (best served first)
  n  by name                           q  (or Ctrl-C) quit`
