package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildCommit(t *testing.T) {
	t.Parallel()
	bi := func(kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{bi("vcs.revision", "35af497", "vcs.modified", "false"), true, "35af497"},
		{bi("vcs.revision", "35af497", "vcs.modified", "true"), true, "35af497-dirty"},
		{bi("vcs.modified", "true"), true, "unknown"},
		{nil, false, "unknown"},
	} {
		if got := buildCommit(c.bi, c.ok); got != c.want {
			t.Errorf("buildCommit(%+v) = %q, want %q", c.bi, got, c.want)
		}
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
