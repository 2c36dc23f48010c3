package config

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzLoad feeds arbitrary bytes to the file decoder. It must never panic;
// when it accepts a file and the result validates, writing that Config as
// YAML and reading it back must give the same Config.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		string(defaultYAML),
		"",
		"---\n",
		"interval: 1s\nintervall: 2s\n",
		"thresholds: [2MiB, 8XB, 32MiB, 128MiB]\n",
		"weights: [1000, 500.5, 250, 70000]\n",
		"paths: {sys: /host/sys, proc: *x}\n",
		"a: &a [*a]\n",
		"interval: &i 2s\nreassert: *i\n",
		"log: debug\n",
		"- 1\n- 2\n",
		"interval: 1s\n---\ninterval: 2s\n",
		"devices: [sd*, ~]\nthrottle_shares: [1, .nan, 0.4, 0.3]\n",
		"? [a]\n: b\n",
		"<<: {interval: 1s}\n",
		"source: cgroup\ncgroup_parent: /lxc.payload\nlisten: ''\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Default()
		if _, err := decode(b, "fuzz.yaml", &c); err != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		var back Config
		if _, err := decode(out, "marshalled.yaml", &back); err != nil {
			t.Fatalf("decode of marshalled config: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", c, back, out)
		}
	})
}
