package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/store"
)

type collectOptions struct {
	nvml          string
	fleet         string
	node          string
	interval      time.Duration
	duration      time.Duration
	influx        collector.InfluxOptions
	dbPath        string
	spoolDir      string
	spoolMaxBytes int64
	batchSize     int
	flushInterval time.Duration
	metricsListen string
	labelTags     []string
	simSeed       uint64
	simCDFs       string
	simCluster    string
}

func newCollectCmd(g *globals) *cobra.Command {
	o := collectOptions{}
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Sample the GPUs through NVML into InfluxDB or the embedded store",
		Long: `Sample every GPU (and MIG device) of this host through NVML each --interval and
write the samples to InfluxDB (--influx-url) or, without it, to the embedded
store (--db). While the store is unreachable samples go to a bounded on-disk
spool (--spool-dir, --spool-max-bytes) and are written, in order, when it is
back; on SIGTERM the collector writes or spools what it holds.

--nvml real needs libnvidia-ml.so; --nvml sim simulates GPUs (one 8-GPU host,
or every node of --fleet) whose load follows the AcmeTrace utilization CDFs;
--nvml auto uses real NVML when it loads and the simulator otherwise.
The collector's own Prometheus metrics are served on --metrics-listen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCollect(cmd.Context(), g, o, cmd.OutOrStdout())
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.nvml, "nvml", "auto", "NVML backend: auto, real or sim")
	f.StringVar(&o.fleet, "fleet", "", "simulate every node of this fleet (FORMAT:SPEC, e.g. uniform:2x8:H100-SXM5-80GB); with --nvml sim or auto")
	f.StringVar(&o.node, "node", host, "node name the samples carry (the simulated host's, without --fleet)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: run until SIGTERM)")
	addCollectSinkFlags(f, &o)
	f.Uint64Var(&o.simSeed, "sim-seed", 1, "seed of the simulated load")
	f.StringVar(&o.simCDFs, "sim-cdfs", "", "AcmeTrace acme_util_cdfs.csv to calibrate the simulated load (default: a built-in coarse copy of Seren's)")
	f.StringVar(&o.simCluster, "sim-cluster", "seren", "cluster of --sim-cdfs to calibrate from: seren or kalos")
	return cmd
}

// addCollectSinkFlags adds the flags of the sampling interval, the sink,
// the spool and the metrics, which collect and agent --collect share.
func addCollectSinkFlags(f *pflag.FlagSet, o *collectOptions) {
	f.DurationVar(&o.interval, "interval", time.Second, "sampling interval")
	f.StringVar(&o.influx.URL, "influx-url", "", "InfluxDB URL; without it samples go to the embedded store (--db)")
	f.StringVar(&o.influx.Token, "influx-token", "", "InfluxDB token (\"user:password\" on InfluxDB 1.8)")
	f.StringVar(&o.influx.Org, "influx-org", "prescient", "InfluxDB organization (ignored by InfluxDB 1.8)")
	f.StringVar(&o.influx.Bucket, "influx-bucket", "prescient/autogen", "InfluxDB bucket (DATABASE/RETENTION_POLICY on InfluxDB 1.8)")
	f.StringVar(&o.dbPath, "db", "prescient.db", "SQLite file for telemetry when no InfluxDB is configured")
	f.StringVar(&o.spoolDir, "spool-dir", "prescient-spool", "directory of the on-disk spool for samples the store cannot take yet")
	f.Int64Var(&o.spoolMaxBytes, "spool-max-bytes", 1<<30, "bound of the spool in bytes; when full, its oldest segment is dropped (counted)")
	f.IntVar(&o.batchSize, "batch-size", 5000, "samples per write")
	f.DurationVar(&o.flushInterval, "flush-interval", time.Second, "longest a sample waits in memory before it is written")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "address for the collector's Prometheus metrics at /metrics (e.g. 127.0.0.1:9464); empty: none")
	f.StringSliceVar(&o.labelTags, "label-tags", nil, "job labels written as InfluxDB tags of gpu_process (an allow-list of low-cardinality keys, e.g. experiment,pipeline); the jobs' other labels are written as fields (labels are known to the agent, agent --collect)")
}

// validate checks the flags, naming the one that is wrong.
func (o collectOptions) validate() (nvml.Mode, error) {
	mode, err := nvml.ParseMode(o.nvml)
	if err != nil {
		return "", fmt.Errorf("--nvml: %w", err)
	}
	switch {
	case o.interval <= 0:
		return "", fmt.Errorf("--interval %s: want a positive duration", o.interval)
	case o.duration < 0:
		return "", fmt.Errorf("--duration %s: want 0 or a positive duration", o.duration)
	case o.spoolMaxBytes < 1<<20:
		return "", fmt.Errorf("--spool-max-bytes %d: want at least 1 MiB (1048576)", o.spoolMaxBytes)
	case o.batchSize <= 0:
		return "", fmt.Errorf("--batch-size %d: want a positive number", o.batchSize)
	case o.flushInterval <= 0:
		return "", fmt.Errorf("--flush-interval %s: want a positive duration", o.flushInterval)
	case o.spoolDir == "":
		return "", errors.New("--spool-dir: want a directory")
	case o.fleet != "" && mode != nvml.ModeSim:
		return "", fmt.Errorf("--fleet: simulates a fleet, which only --nvml sim does, not --nvml %s", mode)
	case o.fleet == "" && o.node == "":
		return "", errors.New("--node: want the node's name")
	}
	if o.influx.URL != "" {
		if err := o.influx.Validate(); err != nil {
			return "", fmt.Errorf("--influx-url/--influx-bucket: %w", err)
		}
	}
	return mode, nil
}

// collectReport is what collect prints when it stops.
type collectReport struct {
	Sink             string  `json:"sink"`
	NVML             string  `json:"nvml"`
	Devices          int     `json:"devices"`
	DurationS        float64 `json:"duration_s"`
	SamplesTotal     int64   `json:"samples_total"`
	SamplesWritten   int64   `json:"samples_written"`
	SamplesRejected  int64   `json:"samples_rejected"`
	SpoolBytes       int64   `json:"spool_bytes"`
	SpoolDroppedFull int64   `json:"samples_dropped_spool_full"`
}

func (r collectReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("sink", r.Sink)
	t.row("nvml", r.NVML)
	t.row("devices", r.Devices)
	t.row("duration_s", fmt.Sprintf("%.1f", r.DurationS))
	t.row("samples_total", r.SamplesTotal)
	t.row("samples_written", r.SamplesWritten)
	t.row("samples_rejected", r.SamplesRejected)
	t.row("samples_dropped_spool_full", r.SpoolDroppedFull)
	t.row("spool_bytes", r.SpoolBytes)
	return t.flush()
}

func runCollect(ctx context.Context, g *globals, o collectOptions, stdout io.Writer) error {
	log := g.logger.With("component", "collect")
	mode, err := o.validate()
	if err != nil {
		return err
	}
	start := time.Now()

	// 1. The hosts: real NVML, or simulated nodes.
	hosts, jobs, backend, err := openHosts(mode, o, g.logger)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	defer func() {
		for _, h := range hosts {
			h.Host.Close()
		}
	}()

	// 2. The sink: InfluxDB when configured, else the embedded store.
	sink, sinkName, closeStore, err := openSink(ctx, o, g.logger)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	defer closeStore()

	// 3. The metrics, the spool and the writer that owns retries.
	reg := prometheus.NewRegistry()
	m := collector.NewMetrics(reg)
	spool, err := collector.OpenSpool(o.spoolDir, o.spoolMaxBytes, g.logger)
	if err != nil {
		return fmt.Errorf("collect: --spool-dir: %w", err)
	}
	w := collector.NewWriter(sink, spool, collector.WriterOptions{BatchSize: o.batchSize, FlushInterval: o.flushInterval}, m, g.logger)
	stopMetrics, err := serveMetrics(o.metricsListen, reg, log)
	if err != nil {
		w.Close(context.Background())
		return err
	}
	defer stopMetrics()

	// 4. Sample until the duration is over or SIGTERM, then write or spool
	// what is held.
	c, err := collector.New(collector.Config{Hosts: hosts, Jobs: jobs, TagLabels: o.labelTags, Interval: o.interval, Metrics: m, Logger: g.logger})
	if err != nil {
		w.Close(context.Background())
		return fmt.Errorf("collect: %w", err)
	}
	runErr := c.Run(ctx, w, o.duration)
	log.Info("stopping: writing or spooling what is held")
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := errors.Join(runErr, w.Close(closeCtx)); err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	tot := m.Totals()
	return g.print(stdout, collectReport{
		Sink: sinkName, NVML: backend, Devices: len(c.Devices()), DurationS: time.Since(start).Seconds(),
		SamplesTotal: tot.Samples, SamplesWritten: tot.Written, SamplesRejected: tot.Rejected,
		SpoolBytes: spool.Bytes(), SpoolDroppedFull: tot.DroppedSpoolFull,
	})
}

// openHosts opens the real host, or one simulated host per fleet node.
func openHosts(mode nvml.Mode, o collectOptions, logger *slog.Logger) ([]collector.HostSource, collector.JobRegistry, string, error) {
	simOpts := nvml.SimOptions{Node: cluster.Node{Name: o.node}, Seed: o.simSeed}
	if o.simCDFs != "" {
		cdfs, err := nvml.ReadCDFFile(o.simCDFs)
		if err != nil {
			return nil, nil, "", fmt.Errorf("--sim-cdfs: %w", err)
		}
		if simOpts.Calibration, err = nvml.CalibrationFrom(cdfs, o.simCluster); err != nil {
			return nil, nil, "", fmt.Errorf("--sim-cdfs %s, --sim-cluster %s: %w", o.simCDFs, o.simCluster, err)
		}
	}
	procJobs := collector.ProcJobs{}
	if o.fleet == "" {
		host, sim, err := nvml.Open(mode, simOpts)
		if err != nil {
			if errors.Is(err, nvml.ErrNoLibrary) {
				return nil, nil, "", fmt.Errorf("--nvml %s: %w (--nvml sim simulates GPUs)", mode, err)
			}
			return nil, nil, "", fmt.Errorf("--nvml %s: %w", mode, err)
		}
		if sim != nil {
			return []collector.HostSource{{Node: o.node, Host: host}}, sim, "sim", nil
		}
		return []collector.HostSource{{Node: o.node, Host: host}}, procJobs, "real", nil
	}
	fleet, err := datasets.ReadFleet(o.fleet)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--fleet: %w", err)
	}
	logger.Info("simulating the fleet's nodes", "component", "collect", "fleet", o.fleet, "nodes", len(fleet.Nodes), "gpus", fleet.GPUCount())
	var hosts []collector.HostSource
	var regs collector.JobRegistries
	for i, n := range fleet.Nodes {
		so := simOpts
		so.Node, so.Seed = n, o.simSeed+uint64(i)
		sim, err := nvml.NewSim(so)
		if err != nil {
			for _, h := range hosts {
				h.Host.Close()
			}
			return nil, nil, "", fmt.Errorf("--fleet: node %s: %w", n.Name, err)
		}
		hosts = append(hosts, collector.HostSource{Node: n.Name, Host: sim})
		regs = append(regs, sim)
	}
	return hosts, regs, "sim", nil
}

// openSink makes the InfluxDB sink, checking the bucket first, or the
// embedded one. An unreachable InfluxDB is not an error: samples spool
// until it answers. A token that may not create the bucket is.
func openSink(ctx context.Context, o collectOptions, logger *slog.Logger) (collector.Sink, string, func(), error) {
	if o.influx.URL == "" {
		st, err := store.Open(ctx, o.dbPath, store.WithLogger(logger))
		if err != nil {
			return nil, "", nil, fmt.Errorf("--db: %w", err)
		}
		return collector.NewEmbeddedSink(st), "embedded:" + o.dbPath, func() { st.Close() }, nil
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := collector.EnsureBucket(ectx, &http.Client{Timeout: 10 * time.Second}, o.influx.URL, o.influx.Token, o.influx.Bucket)
	var be *collector.BucketError
	switch {
	case errors.Is(err, collector.ErrUnauthorized):
		return nil, "", nil, fmt.Errorf("--influx-token: %w", err)
	case errors.Is(err, collector.ErrBucketForbidden):
		return nil, "", nil, fmt.Errorf("--influx-bucket: %w", err)
	case errors.As(err, &be) && be.Status == 0:
		logger.Warn("InfluxDB unreachable at start: samples are spooled until it answers", "component", "collect", "url", o.influx.URL, "error", err)
	case err != nil:
		return nil, "", nil, fmt.Errorf("--influx-url: %w", err)
	}
	sink, err := collector.NewInfluxSink(o.influx)
	if err != nil {
		return nil, "", nil, err
	}
	return sink, "influxdb:" + o.influx.URL + "/" + o.influx.Bucket, func() {}, nil
}

// serveMetrics serves /metrics on addr until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("metrics served", "addr", ln.Addr().String(), "path", "/metrics")
	return func() { srv.Close() }, nil
}
