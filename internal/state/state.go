// Package state keeps the daemon's crash-safe memory: the original value of
// every knob it wrote (so a restarted daemon can restore them) and the level
// of every workload (so a restart does not hand bulk containers level 1).
//
// The file is JSON. Names are stored losslessly: a cgroup name or workload
// ID that is valid UTF-8 is a JSON string, any other is {"base64": "..."}
// (JSON strings cannot carry arbitrary bytes). Each entry also carries the
// inode of its cgroup's directory when it was recorded, so a cgroup removed
// and created again under the same name is not mistaken for the old one.
package state

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// Version is the state file format version written. Older files are
// still read: version 2 kept an original's value as a union of fields
// ("had", "native", "limits"), version 1 also had its names as plain JSON
// strings and no inodes. Version 3 keeps the value as its mechanism's text
// ("value", see internal/mech), so a knob of a new shape changes
// no format.
const Version = 3

// MaxSize is the largest state file Load reads and Save writes, in bytes.
// 10,000 workloads on 4 devices take about 9 MB; a larger file is not one
// this daemon wrote for a host of this kind, and loading it would cost
// seconds and hundreds of MB before the first tick.
const MaxSize = 64 << 20

// File is the content of the state file.
type File struct {
	Version int
	Written time.Time
	// Hierarchy is where the originals' cgroups live: a file written for
	// another mount is not adopted.
	HierarchyVersion int
	HierarchyMount   string
	Originals        []actuate.Original
	Workloads        []Workload
	// Inodes maps a cgroup (as in Originals and Workloads) to the inode of
	// its directory when its entries were recorded; 0 or absent: unknown
	// (version 1 files).
	Inodes map[string]uint64
}

// Workload is one workload's saved policy state.
type Workload struct {
	Cgroup string
	View   policy.View
}

// name is a string stored losslessly: a JSON string when it is valid
// UTF-8, else {"base64": "..."}.
type name string

type b64Name struct {
	Base64 string `json:"base64"`
}

func (n name) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(n)) {
		return json.Marshal(string(n))
	}
	return json.Marshal(b64Name{base64.StdEncoding.EncodeToString([]byte(n))})
}

func (n *name) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var o b64Name
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(o.Base64)
		if err != nil {
			return fmt.Errorf("name %q: %w", o.Base64, err)
		}
		*n = name(raw)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*n = name(s)
	return nil
}

// header is the file's top level without its two lists.
type header struct {
	Version          int       `json:"version"`
	Written          time.Time `json:"written"`
	HierarchyVersion int       `json:"hierarchy_version"`
	HierarchyMount   string    `json:"hierarchy_mount"`
}

// diskOriginal is actuate.Original as stored.
type diskOriginal struct {
	Cgroup name   `json:"cgroup"`
	Ino    uint64 `json:"ino,omitempty"`
	Knob   string `json:"knob"`
	DevStr string `json:"dev"`
	Value  string `json:"value,omitempty"`
}

// oldOriginal is an original's value as versions 1 and 2 stored it: a
// weight's entry (had, native), or the throttle's limits.
type oldOriginal struct {
	Had    bool            `json:"had"`
	Native uint64          `json:"native"`
	Limits cgroupfs.Limits `json:"limits"`
}

// value is o's value as text, in its mechanism's words.
func (o oldOriginal) value(knob string) string {
	if m, err := mech.ByKnob(knob); err == nil && m.Role == mech.Caps {
		return mech.LimitsValue(o.Limits)
	}
	if o.Had {
		return strconv.FormatUint(o.Native, 10)
	}
	return ""
}

// inCgroup reports whether knob is a cgroup file's (keyed by cgroup and
// device), or unknown; false for Docker's weight.
func inCgroup(knob string) bool {
	m, err := mech.ByKnob(knob)
	return err != nil || m.InCgroup()
}

// storedOriginal is an original as any version stored it.
type storedOriginal struct {
	diskOriginal
	oldOriginal
}

// diskWorkload is Workload as stored; View.ID is stored as ID (version 1
// files have it in the view only).
type diskWorkload struct {
	Cgroup name        `json:"cgroup"`
	Ino    uint64      `json:"ino,omitempty"`
	ID     name        `json:"id,omitempty"`
	View   policy.View `json:"view"`
}

// Load reads the state file; a missing file is an empty state and no error.
// It decodes entry by entry: memory is the entries', not a copy of the
// file's bytes.
func Load(path string) (File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: Version}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("read state file %s: %w", path, err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil {
		return File{}, fmt.Errorf("read state file %s: %w", path, err)
	} else if st.Size() > MaxSize {
		return File{}, fmt.Errorf("state file %s is %d bytes, above the %d bytes ddiskqos loads: it was not written by this daemon for this host; move it away to start afresh",
			path, st.Size(), MaxSize)
	}
	f, err := decode(io.LimitReader(bufio.NewReaderSize(fh, 64<<10), MaxSize+1))
	if err != nil {
		return File{}, fmt.Errorf("state file %s is corrupt (%v): move it away to start afresh", path, err)
	}
	if f.Version < 1 || f.Version > Version {
		return File{}, fmt.Errorf("state file %s has version %d, this ddiskqos reads 1 to %d: move it away or use the ddiskqos that wrote it",
			path, f.Version, Version)
	}
	return f, nil
}

// decode reads one state file object, its lists element by element.
func decode(r io.Reader) (File, error) {
	dec := json.NewDecoder(r)
	var f File
	var h header
	if err := expectDelim(dec, '{'); err != nil {
		return f, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return f, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return f, fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		switch key {
		case "version":
			err = dec.Decode(&h.Version)
		case "written":
			err = dec.Decode(&h.Written)
		case "hierarchy_version":
			err = dec.Decode(&h.HierarchyVersion)
		case "hierarchy_mount":
			err = dec.Decode(&h.HierarchyMount)
		case "originals":
			err = decodeList(dec, func(o storedOriginal) error {
				var dev cgroupfs.Dev
				if o.DevStr != "" || inCgroup(o.Knob) { // Docker's weight is a container's, on no device
					var err error
					if dev, err = cgroupfs.ParseDev(o.DevStr); err != nil {
						return fmt.Errorf("original of %q: %w", o.Cgroup, err)
					}
				}
				if o.Value == "" { // version 1 or 2 (version 3 writes none of their fields)
					o.Value = o.oldOriginal.value(o.Knob)
				}
				f.Originals = append(f.Originals, actuate.Original{Cgroup: string(o.Cgroup), Knob: o.Knob, Dev: dev,
					DevStr: o.DevStr, Value: o.Value})
				f.setIno(string(o.Cgroup), o.Ino)
				return nil
			})
		case "workloads":
			err = decodeList(dec, func(w diskWorkload) error {
				if w.ID != "" {
					w.View.ID = string(w.ID)
				}
				f.Workloads = append(f.Workloads, Workload{Cgroup: string(w.Cgroup), View: w.View})
				f.setIno(string(w.Cgroup), w.Ino)
				return nil
			})
		default:
			return f, fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return f, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return f, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return f, errors.New("data after the state object")
	}
	if !seen["version"] {
		return f, errors.New("no version")
	}
	f.Version, f.Written, f.HierarchyVersion, f.HierarchyMount = h.Version, h.Written, h.HierarchyVersion, h.HierarchyMount
	return f, nil
}

func (f *File) setIno(cgroup string, ino uint64) {
	if ino == 0 {
		return
	}
	if f.Inodes == nil {
		f.Inodes = map[string]uint64{}
	}
	f.Inodes[cgroup] = ino
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("found %v where %q was expected", tok, want)
	}
	return nil
}

// decodeList decodes a JSON array (or null) one element at a time.
func decodeList[T any](dec *json.Decoder, each func(T) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("found %v where a list was expected", tok)
	}
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := each(v); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

// encode writes f in the current version, one entry per line.
func encode(f File) ([]byte, error) {
	var buf bytes.Buffer
	hd, err := json.Marshal(header{Version: Version, Written: f.Written,
		HierarchyVersion: f.HierarchyVersion, HierarchyMount: f.HierarchyMount})
	if err != nil {
		return nil, err
	}
	buf.Write(hd[:len(hd)-1]) // without its closing brace
	buf.WriteString(",\n\"originals\": [")
	err = appendList(&buf, len(f.Originals), func(i int) any {
		o := f.Originals[i]
		return diskOriginal{Cgroup: name(o.Cgroup), Ino: f.Inodes[o.Cgroup], Knob: o.Knob,
			DevStr: o.DevStr, Value: o.Value}
	})
	if err != nil {
		return nil, err
	}
	buf.WriteString("],\n\"workloads\": [")
	err = appendList(&buf, len(f.Workloads), func(i int) any {
		w := f.Workloads[i]
		dw := diskWorkload{Cgroup: name(w.Cgroup), Ino: f.Inodes[w.Cgroup], ID: name(w.View.ID), View: w.View}
		dw.View.ID = "" // stored as ID, losslessly
		return dw
	})
	if err != nil {
		return nil, err
	}
	buf.WriteString("]\n}\n")
	return buf.Bytes(), nil
}

// appendList writes the JSON of entries 0..n-1 (entry(i)) to buf, one per
// line, separated by commas.
func appendList(buf *bytes.Buffer, n int, entry func(i int) any) error {
	for i := range n {
		b, err := json.Marshal(entry(i))
		if err != nil {
			return err
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n  ")
		buf.Write(b)
	}
	return nil
}

// tempPattern is the name pattern of Save's temporary files for path:
// ".state.json.*.tmp" beside state.json.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".*.tmp" }

// RemoveTemps removes the temporary files that a Save of path cut short
// (a kill -9, a power loss) left beside it, and those of the versions
// before the pattern named the file (".state-*.tmp"). Only the daemon
// holding the host lock writes path, so none of them is being written.
func RemoveTemps(path string) error {
	dir := filepath.Dir(path)
	var errs []error
	for _, pat := range []string{tempPattern(path), ".state-*.tmp"} {
		left, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return fmt.Errorf("state file %s: %w", path, err)
		}
		for _, f := range left {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove a state file's leftover temporary %s: %w", f, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Save writes the state file atomically and durably: a temporary file in
// the same directory, synced, renamed over the old one, and the directory
// synced so the rename itself survives a power loss.
func Save(path string, f File) error {
	data, err := encode(f)
	if err != nil {
		return fmt.Errorf("encode state file %s: %w", path, err)
	}
	if len(data) > MaxSize {
		return fmt.Errorf("state file %s would be %d bytes, above the %d bytes ddiskqos loads: not written", path, len(data), MaxSize)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync state dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state dir %s: %w", dir, err)
	}
	return nil
}
