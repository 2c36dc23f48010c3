package actuate

// The Docker actuator is the dDiskQoS paper's own way of proceeding: one
// "docker update --blkio-weight W" per level change, through the Engine
// API. ddiskqos keeps it as --actuator docker for comparison; the cgroup
// actuator (Actuator) is the default because the Docker way is weaker:
//
//   - The weight is one number per container, not per device. runc writes it
//     as the cgroup's default weight (v1 blkio.weight, or blkio.bfq.weight
//     when only BFQ is there; v2 io.bfq.weight or io.weight), so it reaches
//     every device, and does nothing on a device whose scheduler ignores
//     weights (none, mq-deadline, kyber): there is no throttle fallback.
//   - The engine may discard it. dockerd 20.10 on a cgroup v1 host probes for
//     blkio.weight, which kernels since 5.0 (no CFQ) do not have, and then
//     answers every update with the warning "Your kernel does not support
//     Block I/O weight or the cgroup is not mounted. Weight discarded." and
//     writes nothing, even when BFQ's blkio.bfq.weight is right there and
//     runc would write it. Such an update is reported here as
//     *WeightDiscardedError, in Applied and once from Apply, and retried only
//     when the level changes or after Config.Reassert.
//   - An update cannot unset a weight: BlkioWeight 0 means "leave as is".
//     Restoring a container that had none (HostConfig.BlkioWeight 0) writes
//     the kernel's default weight instead — see UnsetWeight — after which
//     inspect shows that number rather than 0.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// dockerKnob is the Knob of the originals the Docker actuator records;
// their Cgroup is the container id.
var dockerKnob = mustLookup(mech.DockerWeight).Knob

func mustLookup(n mech.Name) *mech.Mech {
	m, err := mech.Lookup(n)
	if err != nil {
		panic(err) // a name of the registry's own
	}
	return m
}

// DockerAPI is the part of the Engine API the Docker actuator uses;
// *client.Client implements it.
type DockerAPI interface {
	ContainerUpdate(ctx context.Context, id string, options client.ContainerUpdateOptions) (client.ContainerUpdateResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
}

// WeightDiscardedError is an update the engine accepted but did not apply:
// it answered with warnings (dockerd drops the weight, with a warning, when
// it believes the kernel has no blkio weight).
type WeightDiscardedError struct {
	ID       string
	Weight   uint16
	Warnings []string
}

func (e *WeightDiscardedError) Error() string {
	return fmt.Sprintf("docker update --blkio-weight %d %.12s: engine discarded it: %s",
		e.Weight, e.ID, strings.Join(e.Warnings, "; "))
}

// dockerTimeout bounds each Engine API call: the loop waits for them.
const dockerTimeout = 5 * time.Second

// dstate is the Docker actuator's memory of one container.
type dstate struct {
	weight  cgroupfs.Weight // last asked for
	err     error           // last failure, nil when in force
	written bool            // weight was sent (and not to be resent yet)
	at      time.Time       // when last sent in full (for Reassert)
	applied []Applied
}

// Docker applies levels as container-wide blkio weights through the Docker
// Engine API. It is owned by the daemon loop: not safe for concurrent use.
type Docker struct {
	cfg   Config
	api   DockerAPI
	log   *slog.Logger
	unset uint16
	work  map[string]*dstate
	// orig are the containers' original weights, keyed by container id
	// (dockerKey): a container whose original is fresh is not updated.
	orig   *book
	status []DeviceStatus
}

// dockerKey is the originals' key of container id.
func dockerKey(id string) knobKey { return knobKey{cgroup: id, knob: dockerKnob} }

// NewDocker returns a Docker actuator. cfg.Hierarchy is not used (nothing
// is written to cgroup files); cfg.Devices only decide what Applied reports
// and the weight that stands for "unset" (UnsetWeight). Adopted originals
// must all be Docker ones: originals of the cgroup actuator left by a
// previous run under --actuator cgroup would never be restored, so they are
// refused.
func NewDocker(cfg Config, api DockerAPI, adopted []Original) (*Docker, error) {
	if api == nil {
		return nil, errors.New("docker actuator: no Engine API client")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Docker{cfg: cfg, api: api, log: log, unset: UnsetWeight(cfg.Devices),
		work: map[string]*dstate{}, orig: newBook(cfg.Persist)}
	for _, dv := range cfg.Devices {
		d.status = append(d.status, DeviceStatus{Device: dv})
	}
	var errs []error
	for _, o := range adopted {
		if o.Knob != dockerKnob {
			errs = append(errs, fmt.Errorf("state file holds a %s original of %s (dev %s) from the cgroup actuator: restore it by running with --actuator cgroup once, or remove the state file",
				o.Knob, o.Cgroup, o.DevStr))
			continue
		}
		if o.Cgroup == "" {
			errs = append(errs, errors.New("state file holds a docker original without a container id"))
			continue
		}
		o.Dev, o.DevStr = cgroupfs.Dev{}, ""
		d.orig.adopt(o)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("docker actuator: %w", err)
	}
	return d, nil
}

// UnsetWeight is the weight, on Docker's 10..1000 scale, that restores a
// container which had no --blkio-weight: the kernel's default for the first
// weight mechanism among devs. The Engine API cannot unset a weight
// (BlkioWeight 0 leaves it unchanged), so the default is written instead.
// BFQ's default is 100 (blkio.bfq.weight, io.bfq.weight), CFQ's 500
// (blkio.weight). iocost's io.weight default is 100 on its 1..10000 scale,
// which runc's mapping reaches from 20 (→ 102) most closely. With no weight
// device, 100: BFQ is the only weight scheduler on kernels since 5.0.
func UnsetWeight(devs []Device) uint16 {
	for _, d := range devs {
		switch d.Mech {
		case mech.BFQWeight:
			return 100
		case mech.CFQWeight:
			return 500
		case mech.IOCostWeight:
			return 20
		}
	}
	return 100
}

// Devices returns the configured devices.
func (d *Docker) Devices() []Device { return d.cfg.Devices }

// ObservePeak does nothing: weights need no bandwidth estimate.
func (d *Docker) ObservePeak(int, float64) {}

// Hold fails: a Docker weight has no throttle to hold a device's levels
// with.
func (d *Docker) Hold(dev cgroupfs.Dev, _ throttle.Ceiling) error {
	return fmt.Errorf("device %s: the Docker actuator has no throttle to hold its levels with", dev)
}

// Steer fails: a Docker weight has no throttle to steer.
func (d *Docker) Steer(dev cgroupfs.Dev, _ float64) error {
	return fmt.Errorf("device %s: the Docker actuator has no throttle to steer", dev)
}

// Forget drops container id and its original without restoring it.
func (d *Docker) Forget(id string) { d.forget(id) }

// Applied returns what is in force for container id, nil if unknown: the
// one container-wide weight on every configured device (the snapshot shows
// it only where the device's mechanism is a weight; on a throttle device a
// Docker weight does nothing), or on the pseudo-device "all" when no device
// is configured. The slice is the actuator's own: read it before the next
// Apply.
func (d *Docker) Applied(id string) []Applied {
	if w, ok := d.work[id]; ok {
		return w.applied
	}
	return nil
}

func (d *Docker) newState() *dstate {
	w := &dstate{}
	if len(d.cfg.Devices) == 0 {
		w.applied = []Applied{{Device: Device{Name: "all", Mech: mech.DockerWeight}}}
		return w
	}
	w.applied = make([]Applied, len(d.cfg.Devices))
	for i, dv := range d.cfg.Devices {
		w.applied[i].Device = dv
	}
	return w
}

func (w *dstate) setApplied(wt cgroupfs.Weight, err error) {
	w.weight, w.err = wt, err
	for i := range w.applied {
		w.applied[i].Weight, w.applied[i].Err = wt, err
	}
}

// Apply sends each target's weight to the engine when it changed (or
// Config.Reassert has passed). Exempt targets are released. A container
// that has gone is not an error; it is forgotten. Other errors do not stop
// the other targets; they are recorded (see Applied) and returned joined.
// The devices' status says the best level active on each.
func (d *Docker) Apply(now time.Time, targets []Target) ([]DeviceStatus, error) {
	d.computeTop(targets)
	var errs []error
	var pending []dockerWrite
	for i := range targets {
		t := &targets[i]
		if t.Exempt {
			if _, ok := d.work[t.ID]; ok {
				if err := d.Release(t.ID); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		w, ok := d.work[t.ID]
		if !ok {
			w = d.newState()
			d.work[t.ID] = w
		}
		if d.cfg.Reassert > 0 && now.Sub(w.at) >= d.cfg.Reassert {
			w.written = false
			w.at = now
		}
		// A discarded weight would be discarded again: it waits, like one in
		// force, for a change of level or Reassert.
		if w.written && w.weight == t.Weight && (w.err == nil || isDiscarded(w.err)) {
			continue
		}
		if !t.Weight.Valid() {
			err := fmt.Errorf("container %.12s: weight %d outside %d..%d", t.ID, t.Weight, cgroupfs.MinWeight, cgroupfs.MaxWeight)
			w.setApplied(t.Weight, err)
			errs = append(errs, err)
			continue
		}
		if d.cfg.DryRun {
			w.setApplied(t.Weight, nil)
			w.written = true
			continue
		}
		if err := d.record(t.ID); err != nil {
			if cerrdefs.IsNotFound(err) {
				d.forget(t.ID)
				continue
			}
			w.setApplied(t.Weight, err)
			errs = append(errs, err)
			continue
		}
		pending = append(pending, dockerWrite{t.ID, w, uint16(t.Weight)})
	}
	// Originals first (Config.Persist), then the updates they allow.
	if err := d.orig.flush("container(s)"); err != nil {
		errs = append(errs, err)
	}
	for _, p := range pending {
		if d.orig.fresh[dockerKey(p.id)] {
			p.w.setApplied(cgroupfs.Weight(p.wt), errors.New("not written: its original value is not saved yet"))
			continue
		}
		err := d.update(p.id, p.wt)
		if cerrdefs.IsNotFound(err) {
			d.forget(p.id)
			continue
		}
		p.w.setApplied(cgroupfs.Weight(p.wt), err)
		p.w.written = err == nil || isDiscarded(err)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return d.status, errors.Join(errs...)
}

// dockerWrite is an update Apply makes once its original is durable.
type dockerWrite struct {
	id string
	w  *dstate
	wt uint16
}

func isDiscarded(err error) bool {
	_, ok := errors.AsType[*WeightDiscardedError](err)
	return ok
}

// computeTop finds, per device, the best level among targets that did I/O
// on it (reported in the snapshot; weights do not depend on it).
func (d *Docker) computeTop(targets []Target) {
	for i := range d.status {
		d.status[i].TopActive = 0
	}
	for _, t := range targets {
		if t.Exempt {
			continue
		}
		for i, act := range t.Active {
			if !act || i >= len(d.status) {
				continue
			}
			if top := &d.status[i].TopActive; *top == 0 || t.Level < *top {
				*top = t.Level
			}
		}
	}
}

// record reads the container's original weight before its first update;
// it stays fresh (not to be updated) until Config.Persist made it durable.
func (d *Docker) record(id string) error {
	if !d.orig.has(dockerKey(id)) {
		ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
		ci, err := d.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("inspect container %.12s: %w", id, err)
		}
		var native uint16
		if hc := ci.Container.HostConfig; hc != nil {
			native = hc.BlkioWeight
		}
		v := ""
		if native != 0 {
			v = strconv.FormatUint(uint64(native), 10)
		}
		d.orig.add(Original{Cgroup: id, Knob: dockerKnob, Value: v})
	}
	return nil
}

// update is docker update --blkio-weight wt.
func (d *Docker) update(id string, wt uint16) error {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	resp, err := d.api.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{Resources: &container.Resources{BlkioWeight: wt}})
	if err != nil {
		return fmt.Errorf("docker update --blkio-weight %d %.12s: %w", wt, id, err)
	}
	if len(resp.Warnings) > 0 {
		return &WeightDiscardedError{ID: id, Weight: wt, Warnings: resp.Warnings}
	}
	return nil
}

// restore puts a container's original weight back. A container that has
// gone needs nothing, and an engine that discards weights never applied
// ours: neither is an error.
func (d *Docker) restore(o Original) error {
	wt := d.unset
	if o.Value != "" {
		n, err := strconv.ParseUint(o.Value, 10, 16)
		if err != nil {
			return fmt.Errorf("original weight %q of container %.12s is not a number", o.Value, o.Cgroup)
		}
		wt = uint16(n)
	}
	err := d.update(o.Cgroup, wt)
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if isDiscarded(err) {
		d.log.Debug("restore discarded by the engine: no weight of ours was in force", "container", o.Cgroup, "err", err)
		return nil
	}
	return err
}

// Release restores the original weight of container id and forgets it.
func (d *Docker) Release(id string) error {
	if _, ok := d.work[id]; !ok {
		return nil
	}
	if o, ok := d.orig.orig[dockerKey(id)]; ok && !d.cfg.DryRun {
		if err := d.restore(o); err != nil {
			return fmt.Errorf("restore weight of container %.12s: %w", id, err)
		}
		d.orig.drop(dockerKey(id))
	}
	delete(d.orig.fresh, dockerKey(id))
	delete(d.work, id)
	return nil
}

// forget drops a container that has gone, and its original.
func (d *Docker) forget(id string) {
	d.orig.drop(dockerKey(id))
	delete(d.work, id)
}

// RestoreAll restores every original weight the actuator knows, adopted
// ones included, and forgets all containers.
func (d *Docker) RestoreAll() error {
	var errs []error
	for _, k := range d.orig.sorted() {
		if err := d.restore(d.orig.orig[k]); err != nil {
			errs = append(errs, fmt.Errorf("restore weight of container %.12s: %w", k.cgroup, err))
			continue
		}
		d.orig.drop(k)
	}
	d.orig.dirty = true
	clear(d.orig.fresh)
	clear(d.work)
	return errors.Join(errs...)
}

// RestoreOrphans restores adopted originals of containers no current
// workload is. live holds the cgroups of current workloads (the daemon's
// key); a Docker original is keyed by container id, so it is live when its
// container is tracked here or its id is part of a live cgroup path (the
// engine names cgroups after the id: /docker/<id>, docker-<id>.scope).
// OpenFiles is 0: the Engine API's connection is in the daemon's reserve.
func (d *Docker) OpenFiles() int { return 0 }

func (d *Docker) RestoreOrphans(live map[string]bool) error {
	var errs []error
	for _, k := range d.orig.sorted() {
		if _, ok := d.work[k.cgroup]; ok || liveID(live, k.cgroup) {
			continue
		}
		if err := d.restore(d.orig.orig[k]); err != nil {
			errs = append(errs, fmt.Errorf("restore weight of container %.12s: %w", k.cgroup, err))
			continue
		}
		d.orig.drop(k)
	}
	return errors.Join(errs...)
}

func liveID(live map[string]bool, id string) bool {
	if live[id] {
		return true
	}
	for cg := range live {
		if strings.Contains(cg, id) {
			return true
		}
	}
	return false
}

// Originals returns every recorded original weight, sorted by container id,
// and whether they changed since the previous call.
func (d *Docker) Originals() ([]Original, bool) { return d.orig.Originals() }
