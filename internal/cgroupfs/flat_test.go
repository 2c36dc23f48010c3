package cgroupfs

import (
	"errors"
	"reflect"
	"testing"
)

// Captured on this machine (kernel 6.18, cgroup v1): the cpu hierarchy's
// root cpu.stat and the cpuacct hierarchy's cpuacct.stat (USER_HZ ticks).
const (
	v1CPUStat     = "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n"
	v1CPUAcctStat = "user 20302\nsystem 13575\n"
	// The head of a v1 memory.stat (root of the memory hierarchy).
	v1MemoryStat = "cache 9797632\nrss 13172736\nrss_huge 0\nshmem 9097216\nmapped_file 7581696\n" +
		"dirty 90112\nwriteback 0\nswap 0\npgpgin 40399\npgpgout 34791\npgfault 49132\npgmajfault 0\n" +
		"hierarchical_memory_limit 9223372036854771712\nhierarchical_memsw_limit 9223372036854771712\n" +
		"total_cache 2200002560\ntotal_rss 602959872\ntotal_pgfault 5481892\ntotal_pgmajfault 989\n"
	// v2 cpu.stat of a cgroup with the cpu controller enabled (Debian's
	// 6.1 kernel of the test VM; the first three lines are there without
	// the controller too).
	v2CPUStat = "usage_usec 1203040\nuser_usec 901243\nsystem_usec 301797\ncore_sched.force_idle_usec 0\n" +
		"nr_periods 51\nnr_throttled 12\nthrottled_usec 604553\nnr_bursts 0\nburst_usec 0\n"
)

func TestParseFlatKeyed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    map[string]uint64 // keys that must be there, with their values
		n       int               // lines parsed
		wantErr bool
	}{
		{name: "v1 cpu.stat", in: v1CPUStat, n: 5, want: map[string]uint64{"nr_periods": 0, "throttled_time": 0, "burst_time": 0}},
		{name: "v1 cpuacct.stat", in: v1CPUAcctStat, n: 2, want: map[string]uint64{"user": 20302, "system": 13575}},
		{name: "v1 memory.stat", in: v1MemoryStat, n: 18, want: map[string]uint64{
			"total_cache": 2200002560, "total_rss": 602959872, "total_pgfault": 5481892, "total_pgmajfault": 989,
			"hierarchical_memory_limit": 9223372036854771712}},
		{name: "v2 cpu.stat", in: v2CPUStat, n: 9, want: map[string]uint64{
			"usage_usec": 1203040, "user_usec": 901243, "system_usec": 301797, "nr_periods": 51, "nr_throttled": 12, "throttled_usec": 604553}},
		{name: "blank lines, no trailing newline", in: "\nanon 4096\n\nfile 8192", n: 2, want: map[string]uint64{"anon": 4096, "file": 8192}},
		{name: "empty", in: "", n: 0},
		{name: "key only", in: "anon\n", wantErr: true},
		{name: "three fields", in: "anon 1 2\n", wantErr: true},
		{name: "negative", in: "anon -1\n", wantErr: true},
		{name: "not a number", in: "anon 1k\n", wantErr: true},
		{name: "overflow", in: "anon 18446744073709551616\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFlatKeyed([]byte(tt.in), "f.stat")
			if tt.wantErr {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.File != "f.stat" {
					t.Fatalf("err = %v, want *ParseError naming f.stat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.n {
				t.Fatalf("%d lines parsed, want %d: %+v", len(got), tt.n, got)
			}
			for k, v := range tt.want {
				if g, ok := got.Get(k); !ok || g != v {
					t.Errorf("%s = %d, %v; want %d", k, g, ok, v)
				}
			}
			if _, ok := got.Get("no_such_key"); ok {
				t.Error("Get found a key the file does not have")
			}
		})
	}
}

func TestParseFlatKeyedKeepsOrder(t *testing.T) {
	t.Parallel()
	got, err := ParseFlatKeyed([]byte(v1CPUAcctStat), "cpuacct.stat")
	if err != nil {
		t.Fatal(err)
	}
	want := FlatKeyed{{"user", 20302}, {"system", 13575}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseSingleValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in        string
		want      uint64
		unlimited bool
		wantErr   bool
	}{
		{in: "338777963662\n", want: 338777963662},        // cpuacct.usage
		{in: "9223372036854771712\n", want: 1<<63 - 4096}, // v1 memory.limit_in_bytes, no limit
		{in: "max\n", unlimited: true},                    // pids.max, memory.max
		{in: "  7 \n", want: 7},
		{in: "0", want: 0},
		{in: "", wantErr: true},
		{in: "-1\n", wantErr: true}, // cpu.cfs_quota_us is signed: not this parser's file
		{in: "1 2\n", wantErr: true},
		{in: "maximum\n", wantErr: true},
		{in: "50000 100000\n", wantErr: true}, // cpu.max: two values
	}
	for _, tt := range tests {
		got, unl, err := ParseSingleValue([]byte(tt.in), "pids.max")
		if tt.wantErr {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "pids.max" {
				t.Errorf("%q: err = %v, want *ParseError naming pids.max", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want || unl != tt.unlimited {
			t.Errorf("%q: got %d, unlimited %v, %v; want %d, %v", tt.in, got, unl, err, tt.want, tt.unlimited)
		}
	}
}
