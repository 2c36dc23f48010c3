// Package report is what every benchmark's report needs besides its own
// figures: the build of the binary it comes from, and where it goes — a Markdown
// report, a plot and the JSON of every sample into a directory (or the JSON
// alone), and the Markdown or the JSON on stdout.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
)

// Output says where a report goes: Dir ("" for none) gets name.md,
// name.svg and name.json, or name.json alone when JSONOnly; stdout gets
// the JSON when JSON, else the Markdown.
type Output struct {
	Dir  string
	JSON bool
	// JSONOnly writes only name.json into Dir, no Markdown and no plot:
	// for a report whose Markdown is read elsewhere (the host scenario's,
	// a section of docs/bench/matrix.md written from the JSON). stdout
	// still gets the Markdown (with no plot) or the JSON.
	JSONOnly bool
}

// Emit writes the report: name.md, name.svg and name.json into o.Dir
// (name.json alone when o.JSONOnly), then the JSON or the Markdown on
// stdout; the files written are named on stderr. markdown writes the
// report referring to plot ("" for none), svg the plot (unused, and may
// be nil, when o.JSONOnly).
func (o Output) Emit(stdout, stderr io.Writer, name string, report any, markdown func(w io.Writer, plot string), svg func(io.Writer)) error {
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	plot := ""
	if o.Dir != "" && o.JSONOnly {
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return err
		}
		path := filepath.Join(o.Dir, name+".json")
		if err := os.WriteFile(path, js, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench %s: wrote %s\n", name, path)
	} else if o.Dir != "" {
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

// Build is the binary a report comes from, as the Go linker stamped it
// into that binary (runtime/debug.ReadBuildInfo, read by
// internal/buildinfo): every report's JSON carries it as "build".
type Build struct {
	// Revision is the commit the binary was built from (vcs.revision);
	// "unknown" when the binary carries none (go run, go test,
	// -buildvcs=false). Never the working directory's HEAD: a binary need
	// not come from the tree it runs in.
	Revision string `json:"revision"`
	// Modified says that tree had uncommitted changes (vcs.modified).
	Modified bool `json:"modified"`
}

// Binary is the running binary's build.
func Binary() Build { return FromInfo(buildinfo.Read()) }

// FromInfo is the Build of a binary's build information.
func FromInfo(i buildinfo.Info) Build {
	if i.Revision == "" {
		return Build{Revision: "unknown"}
	}
	return Build{Revision: i.Revision, Modified: i.Modified}
}

// String is the build as a report's text names it: the revision, with
// " (modified tree)" when the tree had changes, or "unknown (no VCS stamp
// in the binary)".
func (b Build) String() string {
	switch {
	case b.Revision == "" || b.Revision == "unknown":
		return "unknown (no VCS stamp in the binary)"
	case b.Modified:
		return b.Revision + " (modified tree)"
	}
	return b.Revision
}
