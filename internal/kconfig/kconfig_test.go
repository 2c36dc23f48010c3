package kconfig

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "config.gz"))
	if err != nil {
		t.Fatal(err)
	}
	z := gzip.NewWriter(f)
	if _, err := z.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestValue(t *testing.T) {
	proc := writeConfig(t, "# comment\nCONFIG_BLOCK=y\nCONFIG_IOSCHED_BFQ=m\n# CONFIG_BFQ_GROUP_IOSCHED is not set\nCONFIG_LOCALVERSION=\"-fc\"\n")
	for _, c := range []struct {
		opt, val string
		ok       bool
	}{
		{"CONFIG_IOSCHED_BFQ", "m", true},
		{"CONFIG_BLOCK", "y", true},
		{"CONFIG_BFQ_GROUP_IOSCHED", "", true},
		{"CONFIG_LOCALVERSION", "-fc", true},
		{"CONFIG_NOT_LISTED", "", true},
		{"CONFIG_IOSCHED", "", true}, // a prefix of a listed option is not it
	} {
		if v, ok := Value(proc, c.opt); v != c.val || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.opt, v, ok, c.val, c.ok)
		}
	}
	if WithoutBFQ(proc) {
		t.Error("bfq as a module: WithoutBFQ")
	}
	if !WithoutBFQ(writeConfig(t, "CONFIG_BLOCK=y\n# CONFIG_IOSCHED_BFQ is not set\n")) {
		t.Error("bfq not set: not WithoutBFQ")
	}
	// Nothing published, or not gzip: nothing known.
	if v, ok := Value(t.TempDir(), "CONFIG_BLOCK"); ok || v != "" {
		t.Errorf("no config.gz: %q %v", v, ok)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "config.gz"), []byte("CONFIG_IOSCHED_BFQ=y\n"), 0o644)
	if _, ok := Value(bad, "CONFIG_IOSCHED_BFQ"); ok || WithoutBFQ(bad) {
		t.Error("a config.gz that is not gzip read as known")
	}
}
