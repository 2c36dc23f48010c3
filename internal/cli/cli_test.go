package cli

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

type testOptions struct {
	json, watch bool
	root, mode  string
	every       time.Duration
	n           int
}

var testCmd = &Cmd[testOptions]{
	Info: Info{Name: "probe", Args: "NAME...", Summary: "a test command", Description: "Probes.",
		Examples: "  ddiskqos probe x"},
	Flags: func(o *testOptions, f *FlagSet) {
		f.BoolVar(&o.json, "json", "print JSON")
		f.BoolVar(&o.watch, "watch", "repeat")
		f.StringVar(&o.root, "path-root", "/r", "PATH", "the root", Dirs)
		f.Alias("root", "path-root")
		f.StringVar(&o.mode, "mode", "a", "a|b|c", "the mode")
		f.DurationVar(&o.every, "every", time.Minute, "DUR", "how often")
		f.OnSet("every", func() { o.watch = true })
		f.IntVar(&o.n, "n", 0, "N", "how many")
	},
}

func parse(t *testing.T, args ...string) (*testOptions, []string, int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	o, rest, code, ok := testCmd.Parse(args, &stdout, &stderr)
	if ok != (o != nil) {
		t.Fatalf("%q: ok %v with options %v", args, ok, o)
	}
	return o, rest, code, stdout.String(), stderr.String()
}

func TestParse(t *testing.T) {
	t.Parallel()
	// Flags before, between and after the arguments, one or two dashes,
	// = or a separate word; "--" ends the flags.
	o, rest, _, _, errOut := parse(t, "-json", "x", "--mode=b", "y", "--n", "3", "--", "--z")
	if o == nil || !o.json || o.mode != "b" || o.n != 3 || !slices.Equal(rest, []string{"x", "y", "--z"}) || errOut != "" {
		t.Fatalf("parsed %+v %q, stderr %q", o, rest, errOut)
	}
	if o.root != "/r" || o.every != time.Minute || o.watch {
		t.Errorf("defaults not kept: %+v", o)
	}
	// OnSet: --every implies --watch.
	if o, _, _, _, _ := parse(t, "--every", "2s"); o == nil || !o.watch || o.every != 2*time.Second {
		t.Errorf("--every did not imply --watch: %+v", o)
	}
	// A deprecated alias sets the same value and warns.
	o, _, _, _, errOut = parse(t, "--root", "/x")
	if o == nil || o.root != "/x" || errOut != "ddiskqos probe: --root is deprecated, use --path-root\n" {
		t.Errorf("--root: %+v, stderr %q", o, errOut)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "ddiskqos probe: flag provided but not defined: --bogus\n"},
		{[]string{"--n", "many"}, `ddiskqos probe: invalid value "many" for flag --n: parse error` + "\n"},
		{[]string{"--json=maybe"}, `ddiskqos probe: invalid boolean value "maybe" for --json: parse error` + "\n"},
		{[]string{"x", "--mode"}, "ddiskqos probe: flag needs an argument: --mode\n"},
	} {
		o, _, code, out, errOut := parse(t, tc.args...)
		if o != nil || code != 2 || out != "" || errOut != tc.want+"Run 'ddiskqos probe --help' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	// A command without Args refuses an argument.
	noArgs := &Cmd[struct{}]{Info: Info{Name: "quiet"}}
	var stderr bytes.Buffer
	if _, _, code, ok := noArgs.Parse([]string{"x"}, &stderr, &stderr); ok || code != 2 ||
		!strings.Contains(stderr.String(), `ddiskqos quiet: unexpected argument "x" (quiet takes flags only)`) {
		t.Errorf("argument to a command without Args: exit %d, %q", code, stderr.String())
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help", "-help"} {
		o, _, code, out, errOut := parse(t, "x", arg)
		if o != nil || code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, errOut)
		}
		for _, want := range []string{
			"usage: ddiskqos probe [--json] [--watch] [--path-root PATH] [--mode a|b|c]",
			"Probes.",
			"  --path-root PATH  (also --root, deprecated)\n        the root (default /r)\n",
			"  --every DUR\n        how often (default 1m)\n",
			"  --n N\n        how many\n", // a zero default is not shown
			"  -h, --help\n",
			"Examples:\n  ddiskqos probe x\n",
			"Exit status: " + DefaultExit,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: help lacks %q:\n%s", arg, want, out)
			}
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	fs := testCmd.FlagSet()
	var names []string
	for _, f := range fs.Flags() {
		names = append(names, f.Name)
	}
	// Declaration order, aliases left out.
	if want := []string{"json", "watch", "path-root", "mode", "every", "n"}; !slices.Equal(names, want) {
		t.Errorf("flags %q, want %q", names, want)
	}
	if c := fs.lookup("mode").Complete; c.Kind() != "values" || !slices.Equal(c.Words(), []string{"a", "b", "c"}) {
		t.Errorf("--mode a|b|c completes %+v, want the three words", c)
	}
	if c := fs.lookup("path-root").Complete; c.Kind() != "dir" {
		t.Errorf("--path-root completes %+v, want directories", c)
	}
	if fs.lookup("json").Arg != "" {
		t.Error("a boolean flag has a placeholder")
	}
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	var ran []string
	p := &Program{Summary: "s", Commands: []Command{
		{Spec: testCmd, Run: NoStdin(func(args []string, stdout, stderr io.Writer) int {
			_, rest, code, ok := testCmd.Parse(args, stdout, stderr)
			if ok {
				ran = rest
			}
			return code
		})},
	}}
	var stdout, stderr bytes.Buffer
	if code := p.Run([]string{"nope"}, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `ddiskqos: unknown command "nope"`) {
		t.Errorf("unknown command: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	if code := p.Run([]string{"help", "probe"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: ddiskqos probe") {
		t.Errorf("help probe: exit %d, %q", code, stdout.String())
	}
	if code := p.Run([]string{"probe", "a", "b"}, nil, &stdout, &stderr); code != 0 || !slices.Equal(ran, []string{"a", "b"}) {
		t.Errorf("probe a b: exit %d, ran with %q", code, ran)
	}
	stdout.Reset()
	if code := p.Run([]string{"completion", "fish"}, nil, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
		t.Errorf("completion fish: exit %d, stdout %q", code, stdout.String())
	}
}

// TestVersion: "version" and "--version" print the program's Version on
// stdout, exit 0; an argument is a usage error; a program without a
// Version has neither (and no "version" in its help).
func TestVersion(t *testing.T) {
	t.Parallel()
	p := &Program{Summary: "s", Version: func() string { return "ddiskqos v1.2.3\n" }}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := p.Run(args, nil, &stdout, &stderr); code != 0 || stdout.String() != "ddiskqos v1.2.3\n" || stderr.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := p.Run([]string{"version", "x"}, nil, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
		t.Errorf("version x: exit %d, stdout %q", code, stdout.String())
	}
	stdout.Reset()
	p.WriteUsage(&stdout)
	if !strings.Contains(stdout.String(), "\n  ddiskqos version ") {
		t.Errorf("help does not list version:\n%s", stdout.String())
	}
	none := &Program{Summary: "s"}
	stdout.Reset()
	stderr.Reset()
	if code := none.Run([]string{"--version"}, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "--version"`) {
		t.Errorf("--version without a Version: exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	none.WriteUsage(&stdout)
	if strings.Contains(stdout.String(), "version") {
		t.Errorf("help of a program without a Version lists version:\n%s", stdout.String())
	}
}

func TestRoff(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`a\b`:        `a\eb`,
		"--json":     `\-\-json`,
		"÷ idle":     `\[u00F7] idle`,
		".starts":    `\&.starts`,
		"'quoted'":   `\&'quoted'`,
		"plain text": "plain text",
	} {
		if got := roffLine(in); got != want {
			t.Errorf("roffLine(%q) = %q, want %q", in, got, want)
		}
	}
	got := roffBlock("Para one\nstill one.\n\nList:\n  a  first\n  b  second\nafter")
	want := ".PP\nPara one\nstill one.\n.PP\nList:\n.PP\n.RS 2\n.nf\na  first\nb  second\n.fi\n.RE\n.PP\nafter\n"
	if got != want {
		t.Errorf("roffBlock = %q, want %q", got, want)
	}
}

// onSwitch is a boolean flag.Value that is on by default.
type onSwitch struct{ on bool }

func (s *onSwitch) Set(v string) error { s.on = v == "true"; return nil }
func (s *onSwitch) String() string     { return map[bool]string{true: "true", false: "false"}[s.on] }
func (s *onSwitch) IsBoolFlag() bool   { return true }

// TestSwitchOnByDefaultSaysSo: a switch that defaults to true says so in
// its help, and how to turn it off (issue 18: --throttle-with-weights);
// one that defaults to false shows no default.
func TestSwitchOnByDefaultSaysSo(t *testing.T) {
	t.Parallel()
	f := newFlagSet("probe")
	f.Var(&onSwitch{on: true}, "with-x", "", "also x")
	f.Var(&onSwitch{}, "with-y", "", "also y")
	if got, want := f.lookup("with-x").Default, "true; --with-x=false turns it off"; got != want {
		t.Errorf("default shown for an on switch: %q, want %q", got, want)
	}
	if got := f.lookup("with-y").Default; got != "" {
		t.Errorf("default shown for an off switch: %q, want none", got)
	}
}
