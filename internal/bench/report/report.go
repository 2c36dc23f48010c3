// Package report is what every benchmark's report needs besides its own
// figures: the commit it comes from, and where it goes — a Markdown
// report, a plot and the JSON of every sample into a directory, and the
// Markdown or the JSON on stdout.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// Output says where a report goes: Dir ("" for none) gets name.md,
// name.svg and name.json; stdout gets the JSON when JSON, else the
// Markdown.
type Output struct {
	Dir  string
	JSON bool
}

// Emit writes the report: name.md, name.svg and name.json into o.Dir,
// then the JSON or the Markdown on stdout; the files written are named
// on stderr. markdown writes the report referring to plot ("" for none),
// svg the plot.
func (o Output) Emit(stdout, stderr io.Writer, name string, report any, markdown func(w io.Writer, plot string), svg func(io.Writer)) error {
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	plot := ""
	if o.Dir != "" {
		plot = name + ".svg"
		var md, pic strings.Builder
		markdown(&md, plot)
		svg(&pic)
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return err
		}
		for _, f := range []struct {
			ext  string
			data []byte
		}{{"md", []byte(md.String())}, {"svg", []byte(pic.String())}, {"json", js}} {
			if err := os.WriteFile(filepath.Join(o.Dir, name+"."+f.ext), f.data, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "bench %s: wrote %s\n", name, filepath.Join(o.Dir, name+".{md,svg,json}"))
	}
	if o.JSON {
		_, err := stdout.Write(js)
		return err
	}
	markdown(stdout, plot)
	return nil
}

// Commit names the tree a report comes from: git rev-parse HEAD of the
// working directory's git tree, with "-dirty" when it has changes;
// outside one, the vcs revision Go stamped into the binary (with "-dirty"
// when modified); else "unknown".
func Commit() string {
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		c := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain").Output(); err != nil || len(strings.TrimSpace(string(st))) > 0 {
			c += "-dirty"
		}
		return c
	}
	return buildCommit(debug.ReadBuildInfo())
}

// buildCommit is the vcs revision of a binary's build info.
func buildCommit(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
