// Package containers runs the benchmark's workloads in real Docker
// containers: a local FROM scratch image holding the static ddiskqos
// binary (imported, no registry needed), and containers that can be held
// at the start line until released, so a cgroup can be set up before the
// first I/O. Every container it starts is tracked and removed by
// Runner.Close, also after a failure or Ctrl-C.
package containers

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Entrypoint is where the binary lives in the image.
const Entrypoint = "/ddiskqos"

// Module is the module path whose source can build the binary.
const Module = "github.com/ddiskqos/ddiskqos"

// BuildHint says how to get a static binary by hand.
const BuildHint = "build one with: CGO_ENABLED=0 go build -o ddiskqos ./cmd/ddiskqos (in the ddiskqos source tree), then run that binary"

// IsStatic reports whether the ELF file at path is statically linked (no
// program interpreter), so it runs in a FROM scratch image.
func IsStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// Binary returns a static ddiskqos binary for the image and where it came
// from: exe itself when it is a statically linked ddiskqos (not a test
// binary), else one built with CGO_ENABLED=0 from the module source around
// the working directory. Without either it fails saying how to build one.
func Binary(ctx context.Context, exe string) ([]byte, string, error) {
	if exe != "" && !strings.HasSuffix(exe, ".test") {
		static, err := IsStatic(exe)
		if err == nil && static {
			b, err := os.ReadFile(exe)
			return b, exe, err
		}
	}
	root, err := ModuleRoot(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not a statically linked ddiskqos binary and the module source is not here (%v): %s", exe, err, BuildHint)
	}
	start := time.Now()
	b, err := BuildStatic(ctx, root)
	if err != nil {
		return nil, "", err
	}
	return b, fmt.Sprintf("CGO_ENABLED=0 go build ./cmd/ddiskqos in %s (%s)", root, time.Since(start).Round(time.Millisecond)), nil
}

// ModuleRoot returns the directory of the ddiskqos go.mod that the working
// directory is in.
func ModuleRoot(ctx context.Context) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go toolchain not found: %w", err)
	}
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD = %q)", gomod)
	}
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			if strings.Trim(strings.TrimSpace(m), `"`) != Module {
				return "", fmt.Errorf("%s is module %s, not %s", gomod, m, Module)
			}
			return filepath.Dir(gomod), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// BuildStatic runs CGO_ENABLED=0 go build ./cmd/ddiskqos in the module
// root and returns the binary.
func BuildStatic(ctx context.Context, root string) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go toolchain not found: %w", err)
	}
	dir, err := os.MkdirTemp("", "ddiskqos-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	exe := filepath.Join(dir, "ddiskqos")
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", exe, "./cmd/ddiskqos")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/ddiskqos in %s: %w\n%s", root, err, out)
	}
	return os.ReadFile(exe)
}

// ImportImage imports a one-file image holding bin at Entrypoint as its
// entrypoint under tag — tar -c ddiskqos | docker import --change
// 'ENTRYPOINT ["/ddiskqos"]' - TAG.
func ImportImage(ctx context.Context, c client.APIClient, tag string, bin []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(Entrypoint, "/"), Mode: 0o755, Size: int64(len(bin)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	rc, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, tag,
		client.ImageImportOptions{Changes: []string{fmt.Sprintf(`ENTRYPOINT [%q]`, Entrypoint)}})
	if err != nil {
		return fmt.Errorf("import image %s: %w", tag, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	ii, err := c.ImageInspect(ctx, tag)
	if err != nil {
		return fmt.Errorf("image %s not there after import (%s): %w", tag, bytes.TrimSpace(msg), err)
	}
	if ii.Config == nil || len(ii.Config.Entrypoint) != 1 || ii.Config.Entrypoint[0] != Entrypoint {
		return fmt.Errorf("image %s: entrypoint %v after import, want [%s]", tag, ii.Config, Entrypoint)
	}
	return nil
}

// RemoveImage removes tag; an image already gone is not an error.
func RemoveImage(ctx context.Context, c client.APIClient, tag string) error {
	_, err := c.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove image %s: %w", tag, err)
	}
	return nil
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
