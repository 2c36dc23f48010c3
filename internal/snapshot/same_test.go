package snapshot

import (
	"reflect"
	"testing"
	"time"
)

// sameLeavesOut are the Workload fields Same does not compare, and why.
var sameLeavesOut = map[string]string{
	"Labels": "the caller knows whether its source handed in a new labels map",
}

// TestSameComparesEveryField changes each field of a Workload in turn,
// walking the struct with reflect, and wants Same to see the change: a
// field added to Workload and not to Same fails here, as does a field of a
// kind this test cannot change.
func TestSameComparesEveryField(t *testing.T) {
	t.Parallel()
	base := Workload{ID: "a", Name: "a", Cgroup: "/a", Labels: map[string]string{"k": "v"}, Level: 1, Weight: 1000,
		LevelSince: time.Unix(100, 0), Pressure: &Pressure{}, ReadBytes: 1,
		Applied: []Applied{{Device: "sda", Dev: "8:0", Mechanism: "throttle"}}}
	same := base
	same.Applied = append([]Applied(nil), base.Applied...) // equal, not the same slice
	same.LevelSince = base.LevelSince.In(time.FixedZone("x", 3600))
	if !base.Same(&same) {
		t.Fatal("equal records: Same says they differ")
	}
	typ := reflect.TypeFor[Workload]()
	for name := range sameLeavesOut {
		if _, ok := typ.FieldByName(name); !ok {
			t.Errorf("sameLeavesOut names %s, not a field of Workload", name)
		}
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if _, ok := sameLeavesOut[f.Name]; ok {
			continue
		}
		w := base
		if !change(reflect.ValueOf(&w).Elem().Field(i)) {
			t.Errorf("field %s (%s): this test cannot change it; teach it and Same", f.Name, f.Type)
			continue
		}
		if base.Same(&w) || w.Same(&base) {
			t.Errorf("field %s changed: Same still says equal (compare it in Same)", f.Name)
		}
	}
}

// change sets v to another value of its type and reports whether it could.
func change(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem())) // another pointer: a new value
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Struct:
		tm, ok := v.Interface().(time.Time)
		if !ok {
			return false
		}
		v.Set(reflect.ValueOf(tm.Add(time.Second)))
	default:
		return false
	}
	return true
}
