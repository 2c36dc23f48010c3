package daemon

import (
	"cmp"
	"fmt"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/sensor"
)

// Live reconfiguration: a reloaded policy, a new interval, taken at a
// tick's boundary.

// Reconfigure schedules a new policy configuration (SIGHUP); the loop
// applies it at its next tick. Invalid configurations are refused here.
func (d *Daemon) Reconfigure(c policy.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	d.pending = &c
	d.mu.Unlock()
	return nil
}

// SetInterval schedules a new tick interval (SIGHUP); the loop takes it
// over after its next tick.
func (d *Daemon) SetInterval(iv time.Duration) error {
	if iv <= 0 {
		return fmt.Errorf("interval %s: must be positive", iv)
	}
	d.mu.Lock()
	d.pendingInterval = iv
	d.mu.Unlock()
	return nil
}

// takeInterval applies a pending interval and reports whether it did.
func (d *Daemon) takeInterval() bool {
	d.mu.Lock()
	iv := d.pendingInterval
	d.pendingInterval = 0
	d.mu.Unlock()
	if iv == 0 || iv == d.opts.Interval {
		return false
	}
	d.log.Info("interval changed", "from", d.opts.Interval, "to", iv)
	d.opts.Interval = iv
	d.setPeriods()
	return true
}

// setPeriods sets the sensor's polling backstops from the options and the
// interval.
func (d *Daemon) setPeriods() {
	d.sen.MaxPeriod = sensor.MaxPeriod(d.opts.QuietMax, d.opts.Interval)
	d.sen.ActiveMaxPeriod = 0
	if d.opts.ActiveQuietMax >= 0 {
		d.sen.ActiveMaxPeriod = sensor.MaxPeriod(cmp.Or(d.opts.ActiveQuietMax, DefaultActiveQuietMax), d.opts.Interval)
	}
}
