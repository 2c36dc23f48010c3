package workload

import (
	"fmt"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/bytesize"
)

// parseRate reads a rate in bytes per second: a size with an optional "/s".
func parseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if u, ok := strings.CutSuffix(t, "/s"); ok {
		t = u
	}
	n, err := bytesize.Parse(t)
	if err != nil {
		return 0, &bytesize.Error{Input: s, Msg: err.(*bytesize.Error).Msg}
	}
	return n, nil
}

// humanBytes formats n with an IEC unit, for people (not for parsing back).
func humanBytes(n float64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%.0f B", n)
	}
	i := -1
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", n, units[i])
}
