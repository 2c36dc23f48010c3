package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
)

// A report names the binary's own revision, "unknown" without a VCS
// stamp (go run, go test), whatever tree the process runs in.
func TestFromInfo(t *testing.T) {
	t.Parallel()
	const rev = "35af4970123456789abcdef0123456789abcdef0"
	for _, c := range []struct {
		info buildinfo.Info
		want Build
		text string
	}{
		{buildinfo.Info{Revision: rev}, Build{Revision: rev}, rev},
		{buildinfo.Info{Revision: rev, Modified: true}, Build{Revision: rev, Modified: true}, rev + " (modified tree)"},
		{buildinfo.Info{Modified: true}, Build{Revision: "unknown"}, "unknown (no VCS stamp in the binary)"},
		{buildinfo.Info{}, Build{Revision: "unknown"}, "unknown (no VCS stamp in the binary)"},
	} {
		got := FromInfo(c.info)
		if got != c.want || got.String() != c.text {
			t.Errorf("FromInfo(%+v) = %+v %q, want %+v %q", c.info, got, got, c.want, c.text)
		}
	}
	// This test binary: whatever go test stamped, never git's HEAD of the
	// working directory unless the binary says so.
	if got, want := Binary(), FromInfo(buildinfo.Read()); got != want {
		t.Errorf("Binary() = %+v, want %+v", got, want)
	}
	js, err := json.Marshal(Build{Revision: rev, Modified: true})
	if err != nil || string(js) != `{"revision":"`+rev+`","modified":true}` {
		t.Errorf("JSON %s, %v", js, err)
	}
}

// Emit writes the three files into the directory and the Markdown (which
// names the plot) or the JSON on stdout.
func TestEmit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	md := func(w io.Writer, plot string) { fmt.Fprintf(w, "# r\nplot %q\n", plot) }
	svg := func(w io.Writer) { io.WriteString(w, "<svg/>") }
	rep := struct {
		N int `json:"n"`
	}{7}
	var out, errOut bytes.Buffer
	if err := (Output{Dir: dir}).Emit(&out, &errOut, "x", rep, md, svg); err != nil {
		t.Fatal(err)
	}
	for ext, want := range map[string]string{"md": "# r\nplot \"x.svg\"\n", "svg": "<svg/>", "json": "{\n  \"n\": 7\n}\n"} {
		b, err := os.ReadFile(filepath.Join(dir, "x."+ext))
		if err != nil || string(b) != want {
			t.Errorf("x.%s: %q (%v), want %q", ext, b, err, want)
		}
	}
	if out.String() != "# r\nplot \"x.svg\"\n" || !strings.Contains(errOut.String(), "wrote "+filepath.Join(dir, "x.{md,svg,json}")) {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	if err := (Output{JSON: true}).Emit(&out, &errOut, "x", rep, md, svg); err != nil || out.String() != "{\n  \"n\": 7\n}\n" {
		t.Errorf("--json: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := (Output{}).Emit(&out, &errOut, "x", rep, md, svg); err != nil || out.String() != "# r\nplot \"\"\n" {
		t.Errorf("no --out: %q, %v", out.String(), err)
	}
}

// TestEmitJSONOnly: with JSONOnly the directory gets name.json and
// nothing else (no .md, no .svg: the host scenario's Markdown is
// matrix.md's section), stdout the Markdown naming no plot, or the JSON.
// Mutation checked: JSONOnly ignored, the .md and .svg come back.
func TestEmitJSONOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	md := func(w io.Writer, plot string) { fmt.Fprintf(w, "# r\nplot %q\n", plot) }
	rep := struct {
		N int `json:"n"`
	}{7}
	var out, errOut bytes.Buffer
	if err := (Output{Dir: dir, JSONOnly: true}).Emit(&out, &errOut, "x", rep, md, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "x.json" {
		t.Errorf("%s holds %v (%v), want x.json alone", dir, ents, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "x.json")); err != nil || string(b) != "{\n  \"n\": 7\n}\n" {
		t.Errorf("x.json: %q (%v)", b, err)
	}
	if out.String() != "# r\nplot \"\"\n" || !strings.Contains(errOut.String(), "wrote "+filepath.Join(dir, "x.json")+"\n") {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	if err := (Output{Dir: dir, JSON: true, JSONOnly: true}).Emit(&out, &errOut, "x", rep, md, nil); err != nil || out.String() != "{\n  \"n\": 7\n}\n" {
		t.Errorf("--json: %q, %v", out.String(), err)
	}
}
