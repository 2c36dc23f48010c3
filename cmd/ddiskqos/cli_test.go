package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// leafCommand is a command that runs, with the flags it declares.
type leafCommand struct {
	path  string // "bench paper"
	info  *cli.Info
	flags []*cli.Flag
}

// leafCommands lists every runnable command of the program.
func leafCommands() []leafCommand {
	var out []leafCommand
	var walk func([]cli.Command)
	walk = func(cmds []cli.Command) {
		for _, c := range cmds {
			if len(c.Sub) > 0 {
				walk(c.Sub)
				continue
			}
			info := c.Spec.Doc()
			out = append(out, leafCommand{path: info.FullName(), info: info, flags: c.Spec.FlagSet().Flags()})
		}
	}
	walk(program().Commands)
	return out
}

// TestEveryCommandHelp: --help of every command teaches — its usage line,
// every flag it parses, examples and the exit status — on stdout, exit 0;
// and every command reports a bad flag the same way: its name, the flag
// spelled --name, a hint to --help, exit 2.
func TestEveryCommandHelp(t *testing.T) {
	t.Parallel()
	cmds := leafCommands()
	if len(cmds) < 6 {
		t.Fatalf("%d commands, want run, status, check and three benchmarks at least", len(cmds))
	}
	for _, c := range cmds {
		var stdout, stderr bytes.Buffer
		args := append(strings.Fields(c.path), "--help")
		if code := run(args, nil, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("%s --help: exit %d, stderr %q", c.path, code, stderr.String())
		}
		help := stdout.String()
		for _, want := range []string{"usage: ddiskqos " + c.path, "Examples:\n  ", "Exit status", "--help"} {
			if !strings.Contains(help, want) {
				t.Errorf("%s --help lacks %q", c.path, want)
			}
		}
		for _, f := range c.flags {
			if !strings.Contains(help, "  --"+f.Name) {
				t.Errorf("%s --help lacks its flag --%s", c.path, f.Name)
			}
			if f.Default != "" && !strings.Contains(strings.Join(strings.Fields(help), " "), "default "+f.Default) {
				t.Errorf("%s --help does not show the default of --%s (%s)", c.path, f.Name, f.Default)
			}
		}
		for _, line := range strings.Split(help, "\n") {
			if len([]rune(line)) > 80 {
				t.Errorf("%s --help: line longer than 80 columns: %q", c.path, line)
			}
		}

		stdout.Reset()
		stderr.Reset()
		args = append(strings.Fields(c.path), "-bogus")
		if code := run(args, nil, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
			t.Errorf("%s -bogus: exit %d, stdout %q; want 2 and nothing", c.path, code, stdout.String())
		}
		want := "ddiskqos " + c.path + ": flag provided but not defined: --bogus\nRun 'ddiskqos " + c.path + " --help' for usage.\n"
		if stderr.String() != want {
			t.Errorf("%s -bogus: stderr %q, want %q", c.path, stderr.String(), want)
		}
	}
}

// TestManPageUpToDate: docs/ddiskqos.1 is what "ddiskqos man" prints
// (make man, or go test -run ManPage -update, rewrites it).
func TestManPageUpToDate(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "docs", "ddiskqos.1")
	var got bytes.Buffer
	if code := run([]string{"man"}, nil, &got, os.Stderr); code != 0 {
		t.Fatalf("ddiskqos man: exit %d", code)
	}
	if testkit.Updating() {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (make man writes it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("docs/ddiskqos.1 is not what \"ddiskqos man\" prints: run make man")
	}
}

// TestManPageRenders formats the page with groff as man(1) would, with
// every warning on: none may be printed, and the text must hold every
// command and every flag of every command.
func TestManPageRenders(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("groff")
	testkit.Need(t, err == nil, "groff (Debian groff-base) to render the man page: %v", err)
	var page bytes.Buffer
	run([]string{"man"}, nil, &page, os.Stderr)
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-rLL=100n", "-P-cbu")
	cmd.Stdin = bytes.NewReader(page.Bytes())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || errOut.Len() > 0 {
		t.Fatalf("groff: %v, warnings:\n%s", err, errOut.String())
	}
	// Plain text (-P-cbu: no bold, no underline); minus signs and
	// hyphens read as the ASCII hyphen a reader types.
	text := strings.NewReplacer("−", "-", "‐", "-").Replace(out.String())
	for _, c := range leafCommands() {
		if !strings.Contains(text, "ddiskqos "+c.path) {
			t.Errorf("man page lacks the command %q", c.path)
		}
		for _, f := range c.flags {
			if !strings.Contains(text, "--"+f.Name) {
				t.Errorf("man page lacks --%s of %s", f.Name, c.path)
			}
		}
	}
	for _, want := range []string{"NAME", "SYNOPSIS", "EXIT STATUS", "(also --sys, deprecated)"} {
		if !strings.Contains(text, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
}

// bashComplete runs the generated completion in a real bash, sourced as a
// user would, and returns what it completes for the words of a command
// line (the last one is the word under the cursor).
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	prog := `source "$1" || exit 9
complete -p ddiskqos >/dev/null || exit 8
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
_ddiskqos
printf '%s\n' "${COMPREPLY[@]}"`
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog, "bash", script).Output()
	if err != nil {
		t.Fatalf("bash completing %q: %v", words, err)
	}
	return strings.Fields(string(out))
}

// TestCompletionBash checks the script with bash -n, then drives it in a
// real bash: commands, groups, every flag of every command, enum values,
// flag values skipped on the way, --flag=value.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("bash")
	testkit.Need(t, err == nil, "bash: %v", err)
	var script bytes.Buffer
	if code := run([]string{"completion", "bash"}, nil, &script, os.Stderr); code != 0 {
		t.Fatalf("completion bash: exit %d", code)
	}
	path := filepath.Join(t.TempDir(), "ddiskqos.bash")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	if out, err := exec.Command("bash", "--norc", "-c", `source "$1" && complete -p ddiskqos`, "bash", path).Output(); err != nil ||
		strings.TrimSpace(string(out)) != "complete -F _ddiskqos ddiskqos" {
		t.Fatalf("complete -p ddiskqos: %q, %v", out, err)
	}
	expect := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("completed %q, want %q", got, want)
		}
	}
	var top []string
	for _, c := range program().Commands {
		top = append(top, c.Spec.Doc().Name)
	}
	if !slices.Contains(top, "run") || !slices.Contains(top, "bench") {
		t.Fatalf("program's commands %q lack run or bench", top)
	}
	expect(bashComplete(t, path, "ddiskqos", ""), append(top, "version", "completion", "man", "help")...)
	expect(bashComplete(t, path, "ddiskqos", "che"), "check")
	expect(bashComplete(t, path, "ddiskqos", "bench", ""), "paper", "scale", "contention")
	expect(bashComplete(t, path, "ddiskqos", "completion", ""), "bash", "zsh")
	expect(bashComplete(t, path, "ddiskqos", "run", "--source", ""), "auto", "docker", "cgroup")
	expect(bashComplete(t, path, "ddiskqos", "run", "--source", "=", "c"), "cgroup")
	expect(bashComplete(t, path, "ddiskqos", "run", "-log-format", "j"), "json")
	expect(bashComplete(t, path, "ddiskqos", "status", "--sort", ""), "name", "level", "rate")
	// A flag's value is not taken for a command; a boolean takes none.
	expect(bashComplete(t, path, "ddiskqos", "check", "--path-sys", "bench", "--js"), "--json")
	expect(bashComplete(t, path, "ddiskqos", "bench", "paper", "--quick", "--ou"), "--out")
	// Deprecated spellings still skip their value, and are not offered.
	expect(bashComplete(t, path, "ddiskqos", "check", "--sys", "/x", "--path-p"), "--path-proc")
	expect(bashComplete(t, path, "ddiskqos", "check", "--sy"))
	// Directories for a root, after the flag's value.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sysroot"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(bashComplete(t, path, "ddiskqos", "check", "--path-sys", filepath.Join(dir, "sys")), filepath.Join(dir, "sysroot"))
	// Block devices, the last entry of a list.
	if devs, _ := os.ReadDir("/sys/block"); len(devs) > 0 {
		name := devs[0].Name()
		got := bashComplete(t, path, "ddiskqos", "run", "--devices", "x,"+name)
		if !slices.Contains(got, "x,"+name) {
			t.Errorf("--devices x,%s completed %q, want x,%s among them", name, got, name)
		}
	}
	// Every flag of every command.
	for _, c := range leafCommands() {
		var want []string
		for _, f := range c.flags {
			want = append(want, "--"+f.Name)
		}
		want = append(want, "--help")
		expect(bashComplete(t, path, append(append([]string{"ddiskqos"}, strings.Fields(c.path)...), "--")...), want...)
	}
}

// TestCompletionZsh checks the script with zsh -n, loads it through
// compinit as a user's zsh does, and checks that ddiskqos is bound to it
// and every command has its function with every flag.
func TestCompletionZsh(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("zsh")
	testkit.Need(t, err == nil, "zsh (Debian zsh) to check the zsh completion: %v", err)
	var script bytes.Buffer
	if code := run([]string{"completion", "zsh"}, nil, &script, os.Stderr); code != 0 {
		t.Fatalf("completion zsh: exit %d", code)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "_ddiskqos")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zsh", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	// From $fpath, as installed: compinit binds it by its #compdef line.
	prog := `fpath=("$1" $fpath); autoload -U compinit; compinit -u -D; print -r -- $_comps[ddiskqos]`
	out, err := exec.Command("zsh", "-f", "-c", prog, "zsh", dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_ddiskqos" {
		t.Fatalf("compinit from fpath: ddiskqos bound to %q, %v", out, err)
	}
	// Sourced after compinit: its functions are defined.
	var fns []string
	for _, c := range leafCommands() {
		fns = append(fns, "_ddiskqos_"+strings.ReplaceAll(c.path, " ", "_"))
	}
	prog = `autoload -U compinit; compinit -u -D; source "$1" || exit 9; print -r -- $_comps[ddiskqos]; shift 2; for f; do whence -w $f; done`
	out, err = exec.Command("zsh", append([]string{"-f", "-c", prog, "zsh", path, dir}, fns...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("zsh: source after compinit: %v\n%s", err, out)
	}
	for _, f := range append([]string{"_ddiskqos"}, fns...) {
		if !strings.Contains(string(out), f) {
			t.Errorf("zsh: %s not defined after sourcing:\n%s", f, out)
		}
	}
	for _, c := range leafCommands() {
		fn := script.String()[strings.Index(script.String(), "\n_ddiskqos_"+strings.ReplaceAll(c.path, " ", "_")+"() {"):]
		fn = fn[:strings.Index(fn, "\n}\n")]
		for _, f := range c.flags {
			if !strings.Contains(fn, "'--"+f.Name+"[") && !strings.Contains(fn, "'--"+f.Name+"=[") {
				t.Errorf("zsh: %s does not complete --%s", c.path, f.Name)
			}
		}
	}
}
