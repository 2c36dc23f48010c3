package view

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
)

// checkReport is the report `ddiskqos check` makes of the tree tr (engine
// at dockerHost, "" for none), with the tree's root written $ROOT before
// the text is laid out: the root's length varies from run to run, and
// the text wraps long lines.
func checkReport(t *testing.T, tr *hosttest.Tree, dockerHost string) host.Report {
	t.Helper()
	var ep *host.DockerEndpoint
	if dockerHost != "" {
		e, err := host.ParseDockerHost(dockerHost)
		if err != nil {
			t.Fatal(err)
		}
		ep = &e
	}
	facts := host.Gather(context.Background(), host.Roots{Sys: tr.Sys, Proc: tr.Proc}, ep)
	js, err := json.Marshal(host.BuildReport(facts, host.Evaluate(facts)))
	if err != nil {
		t.Fatal(err)
	}
	var r host.Report
	if err := json.Unmarshal(bytes.ReplaceAll(js, []byte(tr.Root), []byte("$ROOT")), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sampleHost is hosttest's sample host with a Docker engine; bareHost one
// without cgroups and one disk.
func sampleHost(t *testing.T) host.Report {
	tr := hosttest.Sample(t)
	dh := hosttest.FakeEngine(t, tr.Root, hosttest.Engine{Version: "20.10.24+dfsg1", APIVersion: "1.41", CgroupDriver: "cgroupfs", CgroupVersion: "1",
		StorageDriver: "overlay2", RootDir: "/var/lib/docker"})
	return checkReport(t, tr, dh)
}

func bareHost(t *testing.T) host.Report {
	tr := hosttest.New(t)
	tr.Mountinfo()
	tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedDeadline, Sectors: 100})
	return checkReport(t, tr, "")
}

func checkText(r host.Report) string {
	var b strings.Builder
	Check(&b, r)
	return b.String()
}

func TestCheckGolden(t *testing.T) {
	t.Parallel()
	golden(t, "check/sample.txt", checkText(sampleHost(t)))
	bare := bareHost(t)
	if bare.QoSPossible {
		t.Error("QoS possible without an I/O cgroup hierarchy")
	}
	golden(t, "check/nocgroup.txt", checkText(bare))
}

// TestCheckTextLayout: on the sample host (a small host: QoS warnings and
// 10,000-container limits both) and on one without cgroups, the text
// report puts failures and warnings first, QoS's before the limits', the
// fine limits in the limits' heading and not on lines of their own, what
// is fine last; and no line is wider than CheckWidth columns.
func TestCheckTextLayout(t *testing.T) {
	t.Parallel()
	sample, nocgroup := checkText(sampleHost(t)), checkText(bareHost(t))
	status := regexp.MustCompile(`^  (fail|warn|info|ok  )  (\S+)`)
	for name, out := range map[string]string{"sample": sample, "nocgroup": nocgroup} {
		var order []string // statuses, and "limits:" for the limits' findings
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > CheckWidth {
				t.Errorf("%s: line %d is %d columns wide: %q", name, i+1, n, l)
			}
			if m := status.FindStringSubmatch(l); m != nil {
				s := strings.TrimSpace(m[1])
				if strings.HasPrefix(m[2], "limits.") {
					if s == "ok" {
						t.Errorf("%s: a fine limit on a line of its own: %q", name, l)
					}
					s = "limits:" + s
				}
				order = append(order, s)
			}
		}
		rank := map[string]int{"fail": 0, "warn": 1, "limits:fail": 2, "limits:warn": 3, "info": 4, "ok": 5}
		if !slices.IsSortedFunc(order, func(a, b string) int { return rank[a] - rank[b] }) || len(order) == 0 || order[0] == "ok" {
			t.Errorf("%s: findings in the order %q, want QoS's fails and warns, the limits', info, ok", name, order)
		}
	}
	if !strings.Contains(sample, "\nLimits of a host of 10,000 containers: ") || !strings.Contains(nocgroup, "fine: bridge_ports") {
		t.Errorf("the limits' heading does not summarise the fine ones:\n%s\n%s", sample, nocgroup)
	}
}

// TestCheckFixLines: a fix that chains commands is printed one command a
// line, ending in "&&", a long command broken outside quotes with a
// backslash, so that the lines, pasted, are the same command: joined back
// they are the fix, and bash parses them.
func TestCheckFixLines(t *testing.T) {
	t.Parallel()
	for _, fix := range []string{
		`mkdir -p /etc/systemd/system/docker.service.d && printf '[Service]\nLimitNOFILE=1048576\n' > /etc/systemd/system/docker.service.d/ddiskqos-LimitNOFILE.conf && systemctl daemon-reload && systemctl restart docker`,
		`sysctl -w fs.inotify.max_user_instances=16384 && echo 'fs.inotify.max_user_instances = 16384' >> /etc/sysctl.d/90-ddiskqos.conf`,
		`echo "a quoted string with spaces that is far too long to fit on one line of the report at all" > /tmp/x && true`,
	} {
		lines := fixLines(fix, 80)
		var b strings.Builder
		for i, l := range lines {
			if len(l) > 80 && !strings.ContainsAny(l, `'"`) {
				t.Errorf("line %q wider than 80 with a space to break at", l)
			}
			if i < len(lines)-1 && !strings.HasSuffix(l, " &&") && !strings.HasSuffix(l, ` \`) {
				t.Errorf("line %q of %d neither ends in && nor continues", l, len(lines))
			}
			b.WriteString(strings.TrimSuffix(l, ` \`))
			if i < len(lines)-1 {
				b.WriteString(" ")
			}
		}
		if b.String() != fix {
			t.Errorf("lines %q joined:\n%s\nwant\n%s", lines, b.String(), fix)
		}
		if len(lines) < 2 {
			t.Errorf("%s: one line, want one per command", fix)
		}
		if _, err := exec.LookPath("bash"); err == nil {
			script := "        " + strings.Join(lines, "\n             ") + "\n"
			if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("bash -n on the printed fix:\n%s\n%v %s", script, err, out)
			}
		}
	}
	// Prose is wrapped as prose.
	prose := "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2) and psi=1, then check again with ddiskqos check"
	if got := fixLines(prose, 40); strings.Join(got, " ") != prose || len(got) < 3 {
		t.Errorf("prose fix: %q", got)
	}
}
