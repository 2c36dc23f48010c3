package cli

import (
	"fmt"
	"io"
	"strings"
)

// Main is a command's entry point; it returns the exit status.
type Main func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// NoStdin adapts a command that reads no standard input.
func NoStdin(f func(args []string, stdout, stderr io.Writer) int) Main {
	return func(args []string, _ io.Reader, stdout, stderr io.Writer) int { return f(args, stdout, stderr) }
}

// Command is a subcommand for dispatch and for the generators: its
// declaration and its entry point, or, for a group such as bench, the
// commands under it (Run nil).
type Command struct {
	Spec Spec
	Run  Main
	Sub  []Command
}

// Group is the Spec of a group of commands (bench): no flags of its own.
func Group(info Info) Spec { return &Cmd[struct{}]{Info: info} }

// Program is the binary: its commands, and what its top-level help says.
type Program struct {
	// Summary is the one-line description (NAME in the man page).
	Summary string
	// Description follows the command list: where to start.
	Description string
	Commands    []Command
	// Version, when set, returns what "version" and "--version" print
	// (which build this is); nil leaves both out.
	Version func() string
}

// all is the program's commands with the built-in ones: version (when
// the program has one), completion, man and help.
func (p *Program) all() []Command {
	cmds := append([]Command(nil), p.Commands...)
	if p.Version != nil {
		cmds = append(cmds, Command{Spec: versionCmd, Run: p.runVersion})
	}
	return append(cmds,
		Command{Spec: completionCmd, Run: p.runCompletion},
		Command{Spec: manCmd, Run: p.runMan},
		Command{Spec: helpCmd},
	)
}

var versionCmd = &Cmd[struct{}]{Info: Info{
	Name:    "version",
	Summary: "which build this is: version, commit, Go (also --version)",
	Description: `Prints the version of this binary, the commit it was built from (with
"modified" when the tree had uncommitted changes) and that commit's time,
and the Go toolchain and platform, as the Go linker recorded them.
"` + Binary + ` --version" prints the same.`,
	Examples: `  ddiskqos version
  ddiskqos --version`,
}}

var completionCmd = &Cmd[struct{}]{Info: Info{
	Name: "completion", Args: "bash|zsh", ArgsComplete: Values("bash", "zsh"),
	Summary: "print the shell completion script for bash or zsh",
	Description: `Prints a script that completes the commands of ddiskqos, their flags and
the flags' values (files, block devices, containers, fixed words) in bash
or zsh. It is generated from the same declarations as every command's
--help, so it knows every flag of this binary.`,
	Examples: `  source <(ddiskqos completion bash)                      # this shell
  ddiskqos completion bash > /etc/bash_completion.d/ddiskqos
  ddiskqos completion zsh > "${fpath[1]}/_ddiskqos"       # then compinit`,
}}

var manCmd = &Cmd[struct{}]{Info: Info{
	Name:    "man",
	Summary: "print the manual page (roff) of every command",
	Description: `Prints the manual page of ddiskqos in roff: every command with its
description, every flag with its default, and the examples, generated from
the same declarations as --help. The source tree keeps it as
docs/ddiskqos.1.`,
	Examples: `  ddiskqos man | man -l -
  ddiskqos man > /usr/local/share/man/man1/ddiskqos.1`,
}}

var helpCmd = &Cmd[struct{}]{Info: Info{
	Name: "help", Args: "[COMMAND]",
	Summary: "this text, or a command's own help",
}}

// Run dispatches args[0] to its command; "help", -h and --help print the
// program's help, "help CMD..." the command's; --version is "version".
func (p *Program) Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return p.dispatch(p.all(), nil, args, stdin, stdout, stderr)
}

func (p *Program) dispatch(cmds []Command, group Spec, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		if group == nil {
			p.WriteUsage(w)
		} else {
			writeGroupHelp(w, group, cmds)
		}
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	if name == "--version" && group == nil && p.Version != nil {
		name = versionCmd.Info.Name
	}
	switch name {
	case "-h", "--help", "help":
		if name == "help" && len(rest) > 0 {
			return p.dispatch(cmds, group, append(rest, "--help"), stdin, stdout, stderr)
		}
		usage(stdout)
		return 0
	}
	for _, c := range cmds {
		if c.Spec.Doc().Name != name {
			continue
		}
		if len(c.Sub) > 0 {
			return p.dispatch(c.Sub, c.Spec, rest, stdin, stdout, stderr)
		}
		return c.Run(rest, stdin, stdout, stderr)
	}
	where := Binary
	if group != nil {
		where += " " + group.Doc().Name
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", where, name)
	usage(stderr)
	return 2
}

// WriteUsage writes the program's help: the commands and where to start.
func (p *Program) WriteUsage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s\n\nUsage:\n", Binary, p.Summary)
	writeCommandList(&b, p.all())
	if d := strings.Trim(p.Description, "\n"); d != "" {
		fmt.Fprintf(&b, "\n%s\n", d)
	}
	fmt.Fprintf(&b, "Run \"%s COMMAND --help\" for a command's flags.\nExit status: 0 ok, 1 failure, 2 usage error.\n", Binary)
	io.WriteString(w, b.String())
}

func writeGroupHelp(w io.Writer, g Spec, cmds []Command) {
	var b strings.Builder
	info := g.Doc()
	var names []string
	for _, c := range cmds {
		names = append(names, c.Spec.Doc().Name)
	}
	fmt.Fprintf(&b, "usage: %s %s %s [flags]\n\n", Binary, info.Name, strings.Join(names, "|"))
	if d := strings.Trim(info.Description, "\n"); d != "" {
		fmt.Fprintf(&b, "%s\n\n", d)
	}
	writeCommandList(&b, cmds)
	fmt.Fprintf(&b, "\nRun \"%s %s KIND --help\" for flags.\n", Binary, info.Name)
	if m := strings.Trim(info.More, "\n"); m != "" {
		fmt.Fprintf(&b, "%s\n", m)
	}
	io.WriteString(w, b.String())
}

func (p *Program) runCompletion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	_, rest, code, ok := completionCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 {
		return Usagef(stderr, Binary+" completion", "want one shell, bash or zsh; got %q", rest)
	}
	switch rest[0] {
	case "bash":
		io.WriteString(stdout, p.Bash())
	case "zsh":
		io.WriteString(stdout, p.Zsh())
	default:
		return Usagef(stderr, Binary+" completion", "shell %q: want bash or zsh", rest[0])
	}
	return 0
}

func (p *Program) runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if _, _, code, ok := versionCmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	io.WriteString(stdout, p.Version())
	return 0
}

func (p *Program) runMan(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if _, _, code, ok := manCmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	io.WriteString(stdout, p.Man())
	return 0
}

// leaf is a command that runs, with its flags, for the generators.
type leaf struct {
	info  *Info
	flags []*Flag
	alias []*Flag // deprecated spellings: parsed, not offered
	path  string  // "bench paper"
}

// leaves walks every command, groups first as a command without flags.
func (p *Program) leaves() []leaf {
	var out []leaf
	var walk func(cmds []Command)
	walk = func(cmds []Command) {
		for _, c := range cmds {
			fs := c.Spec.FlagSet()
			l := leaf{info: c.Spec.Doc(), flags: fs.Flags(), path: c.Spec.Doc().FullName()}
			for _, name := range sortedAliases(fs) {
				l.alias = append(l.alias, fs.flags[name])
			}
			out = append(out, l)
			walk(c.Sub)
		}
	}
	walk(p.all())
	return out
}

func sortedAliases(fs *FlagSet) []string {
	var names []string
	for _, f := range fs.Flags() {
		names = append(names, f.Aliases...)
	}
	return names
}

// subNames returns the words that may follow path ("" for the top).
func (p *Program) subNames(path string) []string {
	cmds := p.all()
	if path != "" {
		cmds = nil
		for _, c := range p.all() {
			if c.Spec.Doc().FullName() == path {
				cmds = c.Sub
			}
		}
	}
	var names []string
	for _, c := range cmds {
		names = append(names, c.Spec.Doc().Name)
	}
	return names
}
