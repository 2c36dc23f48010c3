package actuate

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Original is the value a knob had before ddiskqos first wrote it, as the
// knob's mechanism reads it (text, see internal/mech).
type Original struct {
	Cgroup string       `json:"cgroup"` // a container id for Docker's weight
	Knob   string       `json:"knob"`   // the mechanism's Knob: bfq, throttle, io.latency, ...
	Dev    cgroupfs.Dev `json:"-"`
	DevStr string       `json:"dev"`
	Value  string       `json:"value,omitempty"` // "": none was set
}

// knobKey identifies one original: a cgroup's knob on one device.
type knobKey struct {
	cgroup string
	knob   string
	dev    cgroupfs.Dev
}

func keyOf(o Original) knobKey { return knobKey{o.Cgroup, o.Knob, o.Dev} }

// book keeps the originals, for the cgroup actuator and the Docker one
// alike: each is recorded before its knob's first write, stays fresh
// (its knob unwritable) until persist made it durable, and is dropped once
// restored or its cgroup gone.
type book struct {
	persist func([]Original) error // Config.Persist; nil: durable at once
	orig    map[knobKey]Original
	fresh   map[knobKey]bool
	dirty   bool // changed since the last Originals call
}

func newBook(persist func([]Original) error) *book {
	return &book{persist: persist, orig: map[knobKey]Original{}, fresh: map[knobKey]bool{}}
}

// adopt takes an original of a previous run (its state file) as the true
// one: neither fresh nor a change.
func (b *book) adopt(o Original) { b.orig[keyOf(o)] = o }

func (b *book) has(k knobKey) bool { _, ok := b.orig[k]; return ok }

// durable: k's original is recorded and saved, so its knob may be written.
func (b *book) durable(k knobKey) bool { return b.has(k) && !b.fresh[k] }

// add records o, fresh until the next flush.
func (b *book) add(o Original) knobKey {
	k := keyOf(o)
	b.orig[k] = o
	if b.persist != nil {
		b.fresh[k] = true
	}
	b.dirty = true
	return k
}

// drop forgets k's original (restored, or its cgroup gone).
func (b *book) drop(k knobKey) {
	if _, ok := b.orig[k]; ok {
		delete(b.orig, k)
		b.dirty = true
	}
	delete(b.fresh, k)
}

// flush makes the fresh originals durable (persist); what stays fresh
// when it fails is not written (what names the unwritten: knobs,
// containers).
func (b *book) flush(what string) error {
	if len(b.fresh) == 0 || b.persist == nil {
		clear(b.fresh)
		return nil
	}
	if err := b.persist(b.list()); err != nil {
		return fmt.Errorf("originals not durable, %d %s left unwritten: %w", len(b.fresh), what, err)
	}
	clear(b.fresh)
	return nil
}

// sorted returns the keys in a stable order: cgroup, knob, device.
func (b *book) sorted() []knobKey {
	keys := make([]knobKey, 0, len(b.orig))
	for k := range b.orig {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y knobKey) int {
		return cmp.Or(cmp.Compare(x.cgroup, y.cgroup), cmp.Compare(x.knob, y.knob),
			cmp.Compare(x.dev.Major, y.dev.Major), cmp.Compare(x.dev.Minor, y.dev.Minor))
	})
	return keys
}

func (b *book) list() []Original {
	out := make([]Original, 0, len(b.orig))
	for _, k := range b.sorted() {
		out = append(out, b.orig[k])
	}
	return out
}

// Originals returns every recorded original, sorted, and whether they
// changed since the previous call (so the state file is written only then).
func (b *book) Originals() ([]Original, bool) {
	changed := b.dirty
	b.dirty = false
	return b.list(), changed
}
