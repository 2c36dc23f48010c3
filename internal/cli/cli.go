// Package cli declares the subcommands of ddiskqos and their flags once.
// From one declaration come the parsing, the --help text, the bash and zsh
// completion scripts ("ddiskqos completion bash|zsh") and the man page
// ("ddiskqos man", committed as docs/ddiskqos.1), so none of them can drift
// from what a command accepts.
//
// Parsing is the standard library's flag package: -name and --name both
// work, -name=value and -name value too, as every ddiskqos command always
// accepted (README, deploy/ and the tests use both). Help and errors spell
// flags --name. Every command parses, reports errors ("ddiskqos CMD: ...",
// then a hint to --help, exit 2) and prints --help (stdout, exit 0) the same
// way.
//
// # Adopting it in a new subcommand (stats, top, calibrate, ...)
//
// 1. Declare the command beside its code: its options, its help text and
// its flags, each with its name, default, placeholder, usage and what
// completes its value (Files, Dirs, Devices, Containers, Values(...)):
//
//	type statsOptions struct {
//		json  bool
//		every time.Duration
//	}
//
//	var statsCmd = &cli.Cmd[statsOptions]{
//		Info: cli.Info{
//			Name: "stats", Args: "[CONTAINER...]", ArgsComplete: cli.Containers,
//			Summary:     "per-container CPU, memory, block I/O, pids and network",
//			Description: "Reads the counters of each container ...",
//			Examples:    "  ddiskqos stats web-1\n  ddiskqos stats --json | jq .",
//		},
//		Flags: func(o *statsOptions, f *cli.FlagSet) {
//			f.BoolVar(&o.json, "json", "print JSON instead of a table")
//			f.DurationVar(&o.every, "every", 0, "DUR", "print again every DUR; 0 prints once")
//		},
//	}
//
// 2. Parse at the top of the command; --help, bad flags and exit 2 are done:
//
//	func runStats(args []string, stdout, stderr io.Writer) int {
//		o, rest, code, ok := statsCmd.Parse(args, stdout, stderr)
//		if !ok {
//			return code
//		}
//		...
//	}
//
// 3. Add one line to commands() in cmd/ddiskqos/main.go:
//
//	{Spec: statsCmd, Run: cli.NoStdin(runStats)},
//
// and regenerate the man page: make man (TestManPageUpToDate fails until
// docs/ddiskqos.1 is regenerated).
package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Complete says what completes a flag's value or a command's arguments.
type Complete struct {
	kind   string   // "", "file", "dir", "device", "container", "values"
	values []string // for "values"
}

var (
	// None completes nothing: free text such as a number or a duration.
	None = Complete{}
	// Files completes file names.
	Files = Complete{kind: "file"}
	// Dirs completes directory names.
	Dirs = Complete{kind: "dir"}
	// Devices completes block device names as in /sys/block; in a
	// comma-separated list, the last entry.
	Devices = Complete{kind: "device"}
	// Containers completes the names of the Docker engine's containers.
	Containers = Complete{kind: "container"}
)

// Values completes one of a fixed set of words (an enum).
func Values(v ...string) Complete { return Complete{kind: "values", values: v} }

// Kind is "", "file", "dir", "device", "container" or "values".
func (c Complete) Kind() string { return c.kind }

// Words are the words of Values.
func (c Complete) Words() []string { return c.values }

// Info is what a person reads about a command.
type Info struct {
	// Name is the command's word: "check"; for a command under a group its
	// own word ("paper" under "bench").
	Name string
	// Parent is the group's word for a command under a group ("bench").
	Parent string
	// Args is the synopsis of the positional arguments ("[CONTAINER...]");
	// empty for a command that takes flags only (an argument is an error).
	Args string
	// ArgsComplete completes the positional arguments.
	ArgsComplete Complete
	// Summary is one line for the command list.
	Summary string
	// Description comes before the flags: what the command does. Blank
	// lines part paragraphs; a paragraph of indented lines is kept as is.
	Description string
	// More comes after the flags (columns, formats); optional.
	More string
	// Examples are indented command lines, "# comment" allowed.
	Examples string
	// Exit describes the exit status; empty means "0 done, 1 failure, 2
	// usage error".
	Exit string
}

// DefaultExit is the exit status of a command whose Info.Exit is empty.
const DefaultExit = "0 done, 1 failure, 2 usage error."

// Spec is a declared command: its Info and its flags. *Cmd[O] is one; so
// is a Group.
type Spec interface {
	Doc() *Info
	// FlagSet declares the command's flags on a new FlagSet, bound to
	// fresh options; the generators read it.
	FlagSet() *FlagSet
}

// Cmd is a command whose flags are bound to the fields of an O.
type Cmd[O any] struct {
	Info
	// Flags declares every flag, bound to o's fields.
	Flags func(o *O, f *FlagSet)
}

// Doc returns the command's Info.
func (c *Cmd[O]) Doc() *Info { return &c.Info }

// FlagSet declares the command's flags on a new FlagSet.
func (c *Cmd[O]) FlagSet() *FlagSet {
	_, f := c.declare()
	return f
}

func (c *Cmd[O]) declare() (*O, *FlagSet) {
	o, f := new(O), newFlagSet(c.Name)
	if c.Flags != nil {
		c.Flags(o, f)
	}
	return o, f
}

// Parse parses args. On --help it prints the help to stdout and returns
// ok=false, code 0; on a bad flag, or an argument to a command that takes
// none, it prints the error and a hint to stderr and returns ok=false, code
// 2. Otherwise it returns the options and the positional arguments. A
// deprecated alias works and earns a warning on stderr.
func (c *Cmd[O]) Parse(args []string, stdout, stderr io.Writer) (o *O, rest []string, code int, ok bool) {
	o, f := c.declare()
	path := c.path()
	// Flags may follow the arguments (stats web --json), as in GNU tools;
	// after "--" everything is an argument.
	for more := args; ; {
		if err := f.std.Parse(more); err != nil {
			if err == flag.ErrHelp {
				WriteHelp(stdout, c)
				return nil, nil, 0, false
			}
			return nil, nil, Usagef(stderr, path, "%s", dashes(err.Error())), false
		}
		left := f.std.Args()
		if used := len(more) - len(left); used > 0 && more[used-1] == "--" || len(left) == 0 || c.Args == "" {
			rest = append(rest, left...)
			break
		}
		rest, more = append(rest, left[0]), left[1:]
	}
	f.std.Visit(func(fl *flag.Flag) {
		if m := f.flags[fl.Name]; m != nil && m.Deprecated != "" {
			fmt.Fprintf(stderr, "%s: --%s is deprecated, use --%s\n", path, fl.Name, m.Deprecated)
		}
		if fn := f.onSet[fl.Name]; fn != nil {
			fn()
		}
	})
	if c.Args == "" && len(rest) > 0 {
		return nil, nil, Usagef(stderr, path, "unexpected argument %q (%s takes flags only)", rest[0], c.Name), false
	}
	return o, rest, 0, true
}

// Std returns the flag.FlagSet the command's flags parse with; run's
// config layering needs it (config.ApplyFlags, SIGHUP reload). Call it
// from a Flags function and keep it in the options.
func (f *FlagSet) Std() *flag.FlagSet { return f.std }

// path is "ddiskqos NAME", or "ddiskqos GROUP NAME" for a command of a
// group.
func (c *Cmd[O]) path() string { return Binary + " " + c.FullName() }

// FullName is the command's words after the program's: "check", "bench paper".
func (i *Info) FullName() string {
	if i.Parent != "" {
		return i.Parent + " " + i.Name
	}
	return i.Name
}

// Binary is the binary's name in help and errors.
const Binary = "ddiskqos"

// Usagef prints "PATH: message" and a hint to --help on w and returns 2,
// the exit status of a usage error.
func Usagef(w io.Writer, path, format string, a ...any) int {
	fmt.Fprintf(w, "%s: %s\n", path, fmt.Sprintf(format, a...))
	fmt.Fprintf(w, "Run '%s --help' for usage.\n", path)
	return 2
}

var oneDash = regexp.MustCompile(`(^|[\s:])-([a-zA-Z][\w.-]*)`)

// dashes spells the flag package's "-name" as "--name" in its errors.
func dashes(s string) string { return oneDash.ReplaceAllString(s, "$1--$2") }

// Flag is one declared flag, as the generators see it.
type Flag struct {
	Name string
	// Arg is the value's placeholder in the help ("PATH"); empty for a
	// boolean flag, which takes no value.
	Arg string
	// Default as shown by the help; empty when there is none to show.
	Default string
	Usage   string
	// Key is the config-file key the flag sets (run), shown in brackets.
	Key      string
	Complete Complete
	// Aliases are older spellings that still work (deprecated).
	Aliases []string
	// Deprecated is set on an alias: the name to use instead.
	Deprecated string
}

// FlagSet is the flags of one command.
type FlagSet struct {
	std   *flag.FlagSet
	flags map[string]*Flag
	order []string // declaration order; flag.FlagSet sorts by name
	onSet map[string]func()
}

// OnSet runs fn after parsing when the flag name was given on the command
// line (also through an alias): for a flag that implies another.
func (f *FlagSet) OnSet(name string, fn func()) {
	f.lookup(name)
	if f.onSet == nil {
		f.onSet = map[string]func(){}
	}
	f.onSet[name] = fn
	for _, a := range f.flags[name].Aliases {
		f.onSet[a] = fn
	}
}

func newFlagSet(name string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by Parse
	fs.Usage = func() {}
	return &FlagSet{std: fs, flags: map[string]*Flag{}}
}

func (f *FlagSet) add(v flag.Value, name, arg, def, usage string, c []Complete) {
	f.std.Var(v, name, usage)
	fl := &Flag{Name: name, Arg: arg, Default: def, Usage: usage}
	if len(c) > 0 {
		fl.Complete = c[0]
	} else if strings.Contains(arg, "|") {
		fl.Complete = Values(strings.Split(arg, "|")...)
	}
	f.record(fl)
}

// recordArg records a flag that takes a value, with its default as text.
func (f *FlagSet) recordArg(name, arg, def, usage string) {
	f.record(&Flag{Name: name, Arg: arg, Default: showDefault(def), Usage: usage})
}

func (f *FlagSet) record(fl *Flag) {
	f.flags[fl.Name] = fl
	f.order = append(f.order, fl.Name)
}

// BoolVar declares a boolean flag, default false.
func (f *FlagSet) BoolVar(p *bool, name, usage string) {
	f.std.BoolVar(p, name, false, usage)
	f.record(&Flag{Name: name, Usage: usage})
}

// StringVar declares a string flag; arg is its placeholder ("PATH").
func (f *FlagSet) StringVar(p *string, name, def, arg, usage string, c ...Complete) {
	*p = def
	f.add((*stringValue)(p), name, arg, def, usage, c)
}

// IntVar declares an integer flag.
func (f *FlagSet) IntVar(p *int, name string, def int, arg, usage string) {
	f.std.IntVar(p, name, def, usage)
	f.recordArg(name, arg, fmt.Sprint(def), usage)
}

// Int64Var declares a 64-bit integer flag.
func (f *FlagSet) Int64Var(p *int64, name string, def int64, arg, usage string) {
	f.std.Int64Var(p, name, def, usage)
	f.recordArg(name, arg, fmt.Sprint(def), usage)
}

// Uint64Var declares an unsigned 64-bit integer flag.
func (f *FlagSet) Uint64Var(p *uint64, name string, def uint64, arg, usage string) {
	f.std.Uint64Var(p, name, def, usage)
	f.recordArg(name, arg, fmt.Sprint(def), usage)
}

// Float64Var declares a float flag.
func (f *FlagSet) Float64Var(p *float64, name string, def float64, arg, usage string) {
	f.std.Float64Var(p, name, def, usage)
	f.recordArg(name, arg, fmt.Sprint(def), usage)
}

// DurationVar declares a duration flag (500ms, 1s, 2m).
func (f *FlagSet) DurationVar(p *time.Duration, name string, def time.Duration, arg, usage string) {
	f.std.DurationVar(p, name, def, usage)
	d := ""
	if def != 0 {
		d = shortDuration(def)
	}
	f.record(&Flag{Name: name, Arg: arg, Default: d, Usage: usage})
}

// Var declares a flag of any flag.Value. A Value with IsBoolFlag() true
// takes no value (arg is then ignored).
func (f *FlagSet) Var(v flag.Value, name, arg, usage string, c ...Complete) {
	if p, ok := v.(interface{ Placeholder() string }); ok && arg == "" {
		arg = p.Placeholder()
	}
	def := showDefault(v.String())
	if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		// A switch takes no value; one that is on by default says so, and
		// how to turn it off.
		arg, def = "", ""
		if v.String() == "true" {
			def = "true; --" + name + "=false turns it off"
		}
	}
	f.add(v, name, arg, def, usage, c)
	if k, ok := v.(interface{ ConfigKey() string }); ok {
		f.flags[name].Key = k.ConfigKey()
	}
}

// Describe sets what completes the value of a declared flag (Var guesses
// only from a placeholder of the form a|b|c).
func (f *FlagSet) Describe(name string, c Complete) {
	f.lookup(name).Complete = c
}

// Alias makes old a deprecated spelling of the declared flag name: it sets
// the same value, the help names it, completion does not offer it, and
// using it prints a warning.
func (f *FlagSet) Alias(old, name string) {
	fl := f.lookup(name)
	f.std.Var(f.std.Lookup(name).Value, old, "deprecated: use --"+name)
	fl.Aliases = append(fl.Aliases, old)
	f.flags[old] = &Flag{Name: old, Arg: fl.Arg, Usage: "deprecated: use --" + name, Complete: fl.Complete, Deprecated: name}
}

// Registrar adapts f to code that registers flag.Values on a
// *flag.FlagSet-like value (config.RegisterFlags): each becomes a declared
// flag; a Value may name its placeholder (Placeholder() string) and its
// config-file key (ConfigKey() string).
func (f *FlagSet) Registrar() interface {
	Var(v flag.Value, name, usage string)
} {
	return registrar{f}
}

type registrar struct{ f *FlagSet }

func (r registrar) Var(v flag.Value, name, usage string) { r.f.Var(v, name, "", usage) }

// lookup returns the declared Flag of name. It panics for an undeclared
// name: a programming error that every test of the command catches.
func (f *FlagSet) lookup(name string) *Flag {
	fl := f.flags[name]
	if fl == nil {
		panic("cli: flag --" + name + " is not declared")
	}
	return fl
}

// Flags returns every flag in the order of declaration; aliases are left
// out (each is in its flag's Aliases).
func (f *FlagSet) Flags() []*Flag {
	var out []*Flag
	for _, name := range f.order {
		if fl := f.flags[name]; fl.Deprecated == "" {
			out = append(out, fl)
		}
	}
	return out
}

// stringValue is flag's own string value, declared here so a string flag
// goes through add like every other.
type stringValue string

func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (s *stringValue) String() string     { return string(*s) }

func showDefault(s string) string {
	switch s {
	case "", "0", "false", "[]":
		return ""
	}
	return s
}

// shortDuration is d.String() without zero trailing units: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	s, _ = strings.CutSuffix(s, "m0s")
	if s != d.String() {
		s += "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}
