package config

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ddiskqos/ddiskqos/internal/bytesize"
)

// Size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// Size is a byte count (or bytes per second). In the file and on the
// command line it is a plain integer or a number with a unit, read by
// bytesize.Parse: 4k, 8MiB, 1.5GiB (powers of 1024), 100MB (powers of
// 1000).
type Size uint64

// ParseSize reads s as bytesize.Parse does.
func ParseSize(s string) (Size, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		return 0, err
	}
	return Size(n), nil
}

// String formats s with the largest IEC unit that divides it exactly, so
// the result parses back to s: 8MiB, 1536KiB, 1000.
func (s Size) String() string {
	for _, u := range []struct {
		n    Size
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if s != 0 && s%u.n == 0 {
			return fmt.Sprintf("%d%s", s/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d", uint64(s))
}

// UnmarshalYAML accepts a plain integer or a size string. A float, a
// negative number or anything that is not a scalar is an error.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a size such as 8MiB or 8388608, got " + kindName(n))
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		var se *bytesize.Error
		if errors.As(err, &se) {
			return fmt.Errorf("want a size such as 8MiB or 8388608: %s", se.Msg)
		}
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes s as String does.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// kindName describes a node for an error message.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return fmt.Sprintf("%q", strings.TrimSpace(n.Value))
}
