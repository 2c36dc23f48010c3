package host

import "github.com/ddiskqos/ddiskqos/internal/kconfig"

// BuiltWithoutBFQ reports whether the kernel under r is known to be built
// without the bfq scheduler (kconfig.WithoutBFQ).
func BuiltWithoutBFQ(r Roots) bool { return kconfig.WithoutBFQ(r.proc()) }
