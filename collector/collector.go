package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/collector/nvml"
)

// HostSource is one host to sample and the node name its samples carry.
type HostSource struct {
	Node string
	Host nvml.Host
}

// Config configures a Collector.
type Config struct {
	Hosts []HostSource
	Jobs  JobRegistry // may be nil
	// TagLabels lists the job labels written as tags (an allow-list of
	// low-cardinality keys, such as "experiment" or "pipeline"); every
	// other label of a job is written as a field. Labels come from a Jobs
	// registry that implements JobLabels.
	TagLabels []string
	Interval  time.Duration
	Metrics   *Metrics
	Logger    *slog.Logger
	// Clock stamps the samples; default time.Now.
	Clock func() time.Time
}

// Collector samples every device of its hosts each interval and hands the
// samples to a Writer.
type Collector struct {
	cfg     Config
	log     *slog.Logger
	devices []device
	buf     []Sample
}

// device is a device with what does not change about it.
type device struct {
	node string
	dev  nvml.Device
	info nvml.DeviceInfo
}

// New enumerates the hosts' devices. A device whose Info fails is sampled
// anyway, under what is known of it; a host whose device list fails is an
// error.
func New(cfg Config) (*Collector, error) {
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("collector: interval %s: want a positive duration", cfg.Interval)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Collector{cfg: cfg, log: cfg.Logger.With("component", "collector")}
	for _, h := range cfg.Hosts {
		devs, err := h.Host.Devices()
		if err != nil {
			return nil, fmt.Errorf("collector: node %s: %w", h.Node, err)
		}
		for i, d := range devs {
			info, err := d.Info()
			if err != nil {
				c.countErr(fmt.Sprintf("%s/%d", h.Node, i), err)
				c.log.Warn("device info incomplete", "node", h.Node, "device", i, "error", err)
			}
			c.devices = append(c.devices, device{node: h.Node, dev: d, info: info})
		}
	}
	return c, nil
}

// Devices returns what is known of the devices sampled, in order.
func (c *Collector) Devices() []nvml.DeviceInfo {
	out := make([]nvml.DeviceInfo, len(c.devices))
	for i, d := range c.devices {
		out[i] = d.info
	}
	return out
}

// SampleOnce reads every device once, stamped now. A device or call that
// fails is counted in prescient_collector_errors_total and does not stop
// the others; a device whose every reading failed gives no sample. The
// returned slice is reused by the next call.
func (c *Collector) SampleOnce(now time.Time) []Sample {
	c.buf = c.buf[:0]
	for i := range c.devices {
		d := &c.devices[i]
		s := Sample{Time: now, Node: d.node, DeviceInfo: d.info}
		ds, err := d.dev.Sample()
		if err != nil {
			c.countErr(d.info.UUID, err)
		}
		s.DeviceSample = ds
		if procs, err := d.dev.Processes(); err != nil {
			c.countErr(d.info.UUID, err)
		} else if len(procs) > 0 {
			s.Processes = make([]ProcessSample, len(procs))
			for j, p := range procs {
				s.Processes[j] = ProcessSample{PID: p.PID, MemUsedBytes: p.MemUsedBytes}
				if c.cfg.Jobs != nil {
					s.Processes[j].JobID, _ = c.cfg.Jobs.JobOfPID(p.PID)
					c.labelProcess(&s.Processes[j])
				}
			}
		}
		if ds.Missing == allFields {
			continue
		}
		c.buf = append(c.buf, s)
	}
	c.cfg.Metrics.Samples.Add(float64(len(c.buf)))
	c.cfg.Metrics.dcgm.update(c.buf)
	return c.buf
}

// allFields has every field bit set.
const allFields = nvml.FieldUtilization | nvml.FieldMemory | nvml.FieldPower | nvml.FieldEnergy |
	nvml.FieldTemperature | nvml.FieldSMClock | nvml.FieldPowerLimit | nvml.FieldThrottle | nvml.FieldECC | nvml.FieldXID

// countErr counts each failed call of err under its device and call.
func (c *Collector) countErr(dev string, err error) {
	var calls []*nvml.CallError
	collectCallErrors(err, &calls)
	if len(calls) == 0 {
		c.cfg.Metrics.Errors.WithLabelValues(dev, "device").Inc()
		return
	}
	for _, ce := range calls {
		c.cfg.Metrics.Errors.WithLabelValues(dev, ce.Call).Inc()
	}
	c.log.Debug("NVML call failed", "device", dev, "error", err)
}

// collectCallErrors finds every CallError in a tree of joined errors.
func collectCallErrors(err error, out *[]*nvml.CallError) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectCallErrors(e, out)
		}
		return
	}
	var ce *nvml.CallError
	if errors.As(err, &ce) {
		*out = append(*out, ce)
	}
}

// Run samples every interval, aligned to multiples of the interval, until
// ctx ends or duration (when positive) has passed, handing the samples to
// w. It does not close w.
func (c *Collector) Run(ctx context.Context, w *Writer, duration time.Duration) error {
	var end <-chan time.Time
	if duration > 0 {
		t := time.NewTimer(duration)
		defer t.Stop()
		end = t.C
	}
	iv := c.cfg.Interval
	c.log.Info("collecting", "devices", len(c.devices), "interval", iv)
	for {
		now := c.cfg.Clock()
		next := now.Truncate(iv).Add(iv)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-end:
			t.Stop()
			return nil
		case <-t.C:
		}
		samples := c.SampleOnce(next)
		batch := make([]Sample, len(samples))
		copy(batch, samples)
		w.Add(batch...)
	}
}

// labelProcess fills the process's job labels, split into tags (the
// allow-list) and fields.
func (c *Collector) labelProcess(p *ProcessSample) {
	jl, ok := c.cfg.Jobs.(JobLabels)
	if !ok || p.JobID == "" {
		return
	}
	for k, v := range jl.LabelsOfJob(p.JobID) {
		if v == "" {
			continue
		}
		if slices.Contains(c.cfg.TagLabels, k) {
			if p.LabelTags == nil {
				p.LabelTags = map[string]string{}
			}
			p.LabelTags[k] = v
			continue
		}
		if p.LabelFields == nil {
			p.LabelFields = map[string]string{}
		}
		p.LabelFields[k] = v
	}
}
