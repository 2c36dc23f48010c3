package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxFileSize bounds what is read as a config file: the documented default
// is about 6 KiB, so anything near this is the wrong file.
const maxFileSize = 1 << 20

// decode applies the YAML document in b onto c, key by key. file names the
// source in errors. It returns the line of every key it set (for the
// origins of later validation errors) and the errors.Join of a *KeyError
// for every unknown key and every value of the wrong type; keys with a bad
// value keep their previous value.
//
// The walk is done here, over yaml.Node, rather than by yaml's own
// Decode with KnownFields, so that every error names the key with its list
// index ("weights[2]") and the value as written, not just a line and a Go
// type, and so that all problems are reported at once.
//
// A key with no value ("devices:" or "devices: ~") is the same as a key
// left out: it keeps the default. This lets an operator comment out every
// entry under a key of a copied default.yaml.
func decode(b []byte, file string, c *Config) (map[string]int, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file: all defaults
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return nil, fmt.Errorf("%s:%d: a second YAML document (after ---); a config file holds one", file, line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	if isNull(root) {
		return nil, nil // only comments
	}
	d := decoder{file: file, lines: map[string]int{}}
	if root.Kind != yaml.MappingNode {
		d.fail(root, "", nil, "the config file must be a mapping of keys, such as \"interval: 1s\", got "+kindName(root))
		return nil, errors.Join(d.errs...)
	}
	d.mapping(root, "", reflect.ValueOf(c).Elem())
	return d.lines, errors.Join(d.errs...)
}

type decoder struct {
	file  string
	lines map[string]int
	errs  []error
}

func (d *decoder) fail(n *yaml.Node, key string, value any, msg string) {
	d.errs = append(d.errs, &KeyError{
		Key: key, Value: value, Msg: msg,
		Origin: fmt.Sprintf("%s:%d", d.file, n.Line),
	})
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// resolve follows an alias (*name) to its anchored node. Aliases cannot
// form a cycle that reaches here: the walk follows the Go type, which is at
// most three levels deep, not the YAML.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// yamlKeys lists the yaml keys of struct type t in field order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" || !f.IsExported() {
		return ""
	}
	return k
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// mapping decodes mapping node n onto struct v; prefix is v's own key.
func (d *decoder) mapping(n *yaml.Node, prefix string, v reflect.Value) {
	t := v.Type()
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), resolve(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			d.fail(kn, join(prefix, "?"), nil, "a key must be a name, got "+kindName(kn))
			continue
		}
		name := kn.Value
		key := join(prefix, name)
		if first, dup := seen[name]; dup {
			d.fail(kn, key, nil, fmt.Sprintf("duplicate key (first at line %d)", first))
			continue
		}
		seen[name] = kn.Line
		field := -1
		for j := range t.NumField() {
			if yamlKey(t.Field(j)) == name {
				field = j
				break
			}
		}
		if field < 0 {
			d.fail(kn, key, nil, unknownKeyMsg(t, prefix, name))
			continue
		}
		if isNull(vn) {
			continue // same as leaving the key out
		}
		d.lines[key] = kn.Line
		d.value(vn, key, v.Field(field))
	}
}

// unknownKeyMsg lists the keys that are allowed where name was found and
// suggests the one meant when it only differs in case or in - versus _.
func unknownKeyMsg(t reflect.Type, prefix, name string) string {
	keys := yamlKeys(t)
	norm := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	for _, k := range keys {
		if k == norm {
			return fmt.Sprintf("unknown key; did you mean %s?", join(prefix, k))
		}
	}
	for _, k := range keys {
		if editDistance(k, norm) <= 2 && len(norm) > 3 {
			return fmt.Sprintf("unknown key; did you mean %s?", join(prefix, k))
		}
	}
	where := "at the top level"
	if prefix != "" {
		where = "under " + prefix
	}
	return fmt.Sprintf("unknown key (the keys %s are %s)", where, strings.Join(keys, ", "))
}

var durationType = reflect.TypeOf(time.Duration(0))

// value decodes n onto v, which is key's field.
func (d *decoder) value(n *yaml.Node, key string, v reflect.Value) {
	n = resolve(n)
	switch {
	case v.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(n, key, nil, fmt.Sprintf("want a mapping of the keys %s, got %s",
				strings.Join(yamlKeys(v.Type()), ", "), kindName(n)))
			return
		}
		d.mapping(n, key, v)
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, key, nil, fmt.Sprintf("want a list such as %s, got %s", listExample(key), kindName(n)))
			return
		}
		if len(n.Content) == 0 {
			v.SetZero() // [] is nil, as in Default()
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		ok := true
		for i, en := range n.Content {
			ek := fmt.Sprintf("%s[%d]", key, i)
			en = resolve(en)
			d.lines[ek] = en.Line
			if isNull(en) {
				d.fail(en, ek, nil, "empty list entry")
				ok = false
				continue
			}
			if !d.scalar(en, ek, s.Index(i)) {
				ok = false
			}
		}
		if ok {
			v.Set(s)
		}
	default:
		d.scalar(n, key, v)
	}
}

// scalar decodes a scalar node onto v; it reports false after an error.
func (d *decoder) scalar(n *yaml.Node, key string, v reflect.Value) bool {
	want := wantFor(v.Type())
	if n.Kind != yaml.ScalarNode {
		d.fail(n, key, nil, fmt.Sprintf("want %s, got %s", want, kindName(n)))
		return false
	}
	// A value with a text form of its own (values.go) reads it: the
	// number check is not for it. yaml turns 500.7 into a uint16 500
	// without a word; a whole number is wanted.
	_, text := v.Addr().Interface().(encoding.TextUnmarshaler)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint,
		reflect.Uint8, reflect.Uint16, reflect.Uint32:
		if !text && n.ShortTag() != "!!int" {
			d.fail(n, key, n.Value, "want "+want)
			return false
		}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		msg := "want " + want
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			msg = err.Error() // from Size.UnmarshalYAML: says what is wrong
		}
		d.fail(n, key, n.Value, msg)
		return false
	}
	return true
}

func wantFor(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(PolicyMode(0)):
		return "recent or paper"
	case t == reflect.TypeOf(LogLevel(0)):
		return "debug, info, warn or error"
	case t == reflect.TypeOf(LatencyMode("")):
		return "auto or off"
	case t == reflect.TypeOf(CgroupPin{}):
		return "GLOB=LEVEL, such as db-*=1"
	case t == reflect.TypeOf(HealthModel{}):
		return "DEVICE=MODEL, such as nvme1n1=aws-gp2:100GiB"
	case t == durationType:
		return "a duration with a unit, such as 500ms, 1s or 2m"
	case t == reflect.TypeOf(Size(0)):
		return "a size such as 8MiB or 8388608"
	case t == reflect.TypeOf(uint16(0)):
		return fmt.Sprintf("a whole number from 0 to %d", 1<<16-1)
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

func listExample(key string) string {
	switch rootKey(key) {
	case "thresholds":
		return "[2MiB, 8MiB, 32MiB, 128MiB]"
	case "weights":
		return "[1000, 500, 250, 100]"
	case "throttle_shares":
		return "[1, 0.6, 0.45, 0.3]"
	case "devices":
		return `["sd*", "nvme*"]`
	case "cgroup_exempt":
		return `["system-*"]`
	case "cgroup_levels":
		return `["db-*=1", "batch-*=4"]`
	}
	return "[a, b]"
}

// editDistance is the Levenshtein distance of a and b, for suggesting the
// key a typo meant.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
