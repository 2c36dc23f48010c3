package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestVersionInProcess: "ddiskqos version" and "ddiskqos --version" print
// the same build description on stdout, exit 0, in its shape: the name and
// version, the revision (unknown in a test binary, which go test builds
// without VCS information), the Go toolchain and platform.
func TestVersionInProcess(t *testing.T) {
	t.Parallel()
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Fatalf("ddiskqos %s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		outs = append(outs, stdout.String())
	}
	if outs[0] != outs[1] {
		t.Errorf("version and --version differ:\n%s\n%s", outs[0], outs[1])
	}
	shape := regexp.MustCompile(`^ddiskqos \S+\nrevision: +\S+.*\n(commit time: +\S+\n)?go: +go1\.\S+ \w+/\w+\n$`)
	if !shape.MatchString(outs[0]) {
		t.Errorf("ddiskqos version printed\n%s\nwant the shape %s", outs[0], shape)
	}
}

// TestVersionBuiltBinary builds ddiskqos as a user does, from a git
// checkout, and runs "ddiskqos --version": it must name the commit built
// (vcs.revision, read from the binary with no -ldflags), its time, whether
// the tree was modified, and the Go toolchain; and a release build's
// -ldflags -X version replaces the version and keeps the revision.
//
// Go stamps VCS information only where the module root holds a .git
// directory; a git worktree (.git a file) gets none, so there the test
// builds a shared clone at HEAD instead (the committed tree).
func TestVersionBuiltBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	testkit.Need(t, err == nil, "go toolchain not found (to build the binary)")
	gitBin, err := exec.LookPath("git")
	testkit.Need(t, err == nil, "git not found (the binary's revision comes from the git checkout)")
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command(gitBin, append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	root := git(".", "rev-parse", "--show-toplevel")
	testkit.Need(t, root != "", "not in a git checkout")
	head := git(root, "rev-parse", "HEAD")
	modified := git(root, "status", "--porcelain") != ""
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		clone := filepath.Join(t.TempDir(), "src")
		git(root, "clone", "-q", "--shared", "--no-checkout", root, clone)
		git(clone, "checkout", "-q", head)
		t.Logf("%s is a git worktree (Go does not stamp those): building a clone at HEAD %s", root, head)
		root, modified = clone, false
	}
	commitTime, err := time.Parse(time.RFC3339, git(root, "show", "-s", "--format=%cI", head))
	if err != nil {
		t.Fatal(err)
	}
	build := func(ldflags string) string {
		t.Helper()
		exe := filepath.Join(t.TempDir(), "ddiskqos")
		cmd := exec.Command(goBin, "build", "-buildvcs=true", "-trimpath", "-ldflags", ldflags, "-o", exe, "./cmd/ddiskqos")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build in %s: %v\n%s", root, err, out)
		}
		out, err := exec.Command(exe, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("ddiskqos --version: %v\n%s", err, out)
		}
		return string(out)
	}

	wantRev := "revision:    " + head + "\n"
	if modified {
		wantRev = "revision:    " + head + " (modified: uncommitted changes)\n"
	}
	wantTail := wantRev + "commit time: " + commitTime.UTC().Format(time.RFC3339) + "\n"
	got := build("-s -w")
	version, rest, _ := strings.Cut(got, "\n")
	// A pseudo-version naming the commit (a tag, where HEAD has one).
	if !strings.HasPrefix(version, "ddiskqos v") || !strings.HasPrefix(rest, wantTail) || !strings.Contains(rest, "go:          go1.") {
		t.Errorf("ddiskqos --version of a build of %s:\n%s\nwant a v-version line, then\n%s", head, got, wantTail)
	}
	if !strings.Contains(version, head[:12]) && !regexp.MustCompile(`^ddiskqos v\d+\.\d+\.\d+$`).MatchString(version) {
		t.Errorf("version %q names neither the commit %s nor a tag", version, head[:12])
	}
	t.Logf("ddiskqos --version:\n%s", got)

	got = build("-s -w -X github.com/ddiskqos/ddiskqos/internal/buildinfo.version=v9.8.7-release")
	if want := "ddiskqos v9.8.7-release\n" + wantTail; !strings.HasPrefix(got, want) {
		t.Errorf("ddiskqos --version of a release build (-X ...buildinfo.version):\n%s\nwant it to start\n%s", got, want)
	}
}
