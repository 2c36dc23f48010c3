package cli

import (
	"fmt"
	"io"
	"strings"
)

// WriteHelp writes the --help text of a command: usage line, description,
// every flag with its placeholder, default, config key and deprecated
// spellings, then More, the examples and the exit status.
func WriteHelp(w io.Writer, s Spec) {
	var b strings.Builder
	info, fs := s.Doc(), s.FlagSet()
	fmt.Fprintf(&b, "usage: %s\n", synopsis(info, fs, 78))
	if d := strings.Trim(info.Description, "\n"); d != "" {
		fmt.Fprintf(&b, "\n%s\n", d)
	}
	if flags := fs.Flags(); len(flags) > 0 {
		b.WriteString("\nFlags:\n")
		for _, f := range flags {
			writeFlag(&b, f)
		}
		writeFlag(&b, &Flag{Name: "help", Usage: "show this help"})
	}
	if m := strings.Trim(info.More, "\n"); m != "" {
		fmt.Fprintf(&b, "\n%s\n", m)
	}
	if e := strings.Trim(info.Examples, "\n"); e != "" {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", e)
	}
	fmt.Fprintf(&b, "\n%s\n", exitText(info))
	io.WriteString(w, b.String())
}

func exitText(info *Info) string {
	e := strings.Trim(info.Exit, "\n")
	if e == "" {
		e = DefaultExit
	}
	if strings.Contains(e, "\n") {
		return "Exit status:\n" + e
	}
	return "Exit status: " + e
}

// synopsis is "ddiskqos NAME [--flag ARG]... ARGS", with [flags] for a
// command of many flags, wrapped at width.
func synopsis(info *Info, fs *FlagSet, width int) string {
	head := Binary + " " + info.FullName()
	var parts []string
	flags := fs.Flags()
	if len(flags) > 8 {
		parts = append(parts, "[flags]")
	} else {
		for _, f := range flags {
			parts = append(parts, "["+flagHead(f)+"]")
		}
	}
	if info.Args != "" {
		parts = append(parts, info.Args)
	}
	line, indent := head, strings.Repeat(" ", len("usage: ")+len(head)+1)
	var out []string
	for _, p := range parts {
		if len(line)+1+len(p) > width-len("usage: ") && line != head && strings.TrimSpace(line) != "" {
			out = append(out, line)
			line = indent[len("usage: "):] + p
			continue
		}
		line += " " + p
	}
	out = append(out, line)
	return strings.Join(out, "\n       ")
}

// flagHead is "--name ARG" or "--name".
func flagHead(f *Flag) string {
	if f.Arg == "" {
		return "--" + f.Name
	}
	return "--" + f.Name + " " + f.Arg
}

func writeFlag(b *strings.Builder, f *Flag) {
	head := "  " + flagHead(f)
	if f.Name == "help" {
		head = "  -h, --help"
	}
	if f.Key != "" {
		head += "  [" + f.Key + "]"
	}
	for _, a := range f.Aliases {
		head += "  (also --" + a + ", deprecated)"
	}
	b.WriteString(head + "\n")
	for _, line := range wrap(usageWithDefault(f), 70) {
		fmt.Fprintf(b, "        %s\n", line)
	}
}

// usageWithDefault is the usage and, unless it already says, the default.
func usageWithDefault(f *Flag) string {
	u := f.Usage
	if f.Default != "" && !strings.Contains(u, "(default") {
		u += " (default " + f.Default + ")"
	}
	return u
}

// wrap splits s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// writeCommandList writes one line per command: "  ddiskqos NAME ARGS" and
// its summary in a column.
func writeCommandList(b *strings.Builder, cmds []Command) {
	const col = 32
	for _, c := range cmds {
		info := c.Spec.Doc()
		head := "  " + Binary + " " + info.FullName()
		if len(c.Sub) > 0 {
			var names []string
			for _, s := range c.Sub {
				names = append(names, s.Spec.Doc().Name)
			}
			head += " " + strings.Join(names, "|")
		} else if info.Args != "" {
			head += " " + info.Args
		} else if len(c.Spec.FlagSet().Flags()) > 0 {
			head += " [flags]"
		}
		lines := wrap(info.Summary, 78-col)
		if len(head) >= col-1 {
			b.WriteString(head + "\n")
		} else if len(lines) > 0 {
			b.WriteString(head + strings.Repeat(" ", col-len(head)) + lines[0] + "\n")
			lines = lines[1:]
		}
		for _, l := range lines {
			b.WriteString(strings.Repeat(" ", col) + l + "\n")
		}
	}
}
