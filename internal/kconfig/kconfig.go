// Package kconfig reads the running kernel's build configuration, which it
// publishes as /proc/config.gz (CONFIG_IKCONFIG_PROC).
package kconfig

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
)

// Value returns the value of option opt (e.g. "CONFIG_IOSCHED_BFQ")
// in the running kernel's build configuration, <proc>/config.gz
// (CONFIG_IKCONFIG_PROC): "y", "m" or the option's string, "" when the
// kernel was built without it ("# opt is not set"). ok is false when the
// kernel does not publish its configuration (or it cannot be read): then
// nothing is known.
func Value(proc, opt string) (val string, ok bool) {
	f, err := os.Open(filepath.Join(proc, "config.gz"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", false
	}
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		line := sc.Text()
		if v, found := strings.CutPrefix(line, opt+"="); found {
			return strings.Trim(v, `"`), true
		}
		if line == "# "+opt+" is not set" {
			return "", true
		}
	}
	// Read to the end without the option: not set (the file lists only
	// the options of this architecture's Kconfig).
	return "", sc.Err() == nil
}

// WithoutBFQ reports whether the running kernel is known to have no
// BFQ scheduler at all, neither built in nor as a module: its published
// configuration (under procfs at proc) says CONFIG_IOSCHED_BFQ is not set. Then no "modprobe
// bfq" can help, and v1 has no group weight of any scheduler.
func WithoutBFQ(proc string) bool {
	v, ok := Value(proc, "CONFIG_IOSCHED_BFQ")
	return ok && v == ""
}
