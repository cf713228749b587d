package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/agent"
	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
)

type agentOptions struct {
	server       string
	token        string
	node         string
	workDir      string
	nvml         string
	fleet        string
	rack         string
	leaf         string
	nvlinkDomain string
	pollWait     time.Duration
	backoffMax   time.Duration
	maxEvents    int
	collect      bool
	sink         collectOptions
	kube         kubeAgentOptions
}

func newAgentCmd(g *globals) *cobra.Command {
	o := agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: register this host's GPUs and run the jobs the control plane assigns",
		Long: `Register this host's GPUs and topology with the control plane (--server, with the
agent token --token), then run each job it assigns as a child process in its
own process group, with CUDA_VISIBLE_DEVICES set to the job's GPUs, its own
working directory and log under --work-dir/jobs/JOB/attempt-N/ (job.log), and
PRESCIENT_JOB_ID, PRESCIENT_ATTEMPT, PRESCIENT_RANK, PRESCIENT_WORLD_SIZE,
PRESCIENT_CHECKPOINT_DIR (--work-dir/jobs/JOB/checkpoints, kept across
attempts) and PRESCIENT_CHECKPOINT_ACK set. A checkpoint request sends the
job's checkpoint signal (SIGUSR1 by default); the job's acknowledgement file
becomes a checkpointed event. Stop sends SIGTERM to the process group, then
SIGKILL after the grace period.

Jobs keep running while the control plane is away and when the agent itself
stops; events wait in memory and are posted, in order, when it is back, and
the agent registers again with its running jobs. The state file
--work-dir/agent-state.json makes sure no attempt starts twice, also across
restarts of the agent, which takes over the jobs that still run.

--nvml real reads the GPUs through libnvidia-ml.so; --nvml sim simulates an
8-GPU host, or the node --node of --fleet; --nvml auto uses real NVML when it
loads. Jobs inherit the agent's environment without its PRESCIENT_* settings.

--collect runs the collector in the same process, with collect's sink flags
(--interval, --influx-url ..., --db, --spool-dir, ...): it knows each job's
processes from the agent; on a simulated host the GPUs of a running job show
its load (90% busy, 60% of the memory) and its process.

--kubernetes runs the node side of serve --backend kubernetes instead (the
DaemonSet of deploy/kubernetes): kubelets run the pods, and the agent relays
the checkpoint requests of the pods Prescient bound to node --node. On a new
prescient.io/checkpoint-requested it sends the checkpoint signal (SIGUSR1, or
the container's PRESCIENT_CHECKPOINT_SIGNAL) to the pod's processes that set
PRESCIENT_CHECKPOINT_ACK (found by the pod UID in /proc/PID/cgroup; the agent
needs hostPID and CAP_SYS_PTRACE and CAP_KILL), waits for that file to change,
and writes prescient.io/checkpointed-at, -step and -path on the pod. With
--collect, a pod's GPU processes are named by the pod's job. --server and
--token are not used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd.Context(), g, o, cmd.OutOrStdout())
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "http://127.0.0.1:8080", "control plane URL")
	f.StringVar(&o.token, "token", "", "agent token (a token with the agent role); env PRESCIENT_TOKEN")
	f.StringVar(&o.node, "node", host, "this node's name")
	f.StringVar(&o.workDir, "work-dir", "prescient-agent", "directory of the state file and of the jobs' working directories, logs and checkpoints")
	f.StringVar(&o.nvml, "nvml", "auto", "NVML backend: auto, real or sim")
	f.StringVar(&o.fleet, "fleet", "", "with --nvml sim: simulate node --node of this fleet (FORMAT:SPEC), its GPUs and topology")
	f.StringVar(&o.rack, "rack", "", "rack of this node (the fleet's, with --fleet)")
	f.StringVar(&o.leaf, "leaf", "", "network leaf of this node (the fleet's, with --fleet)")
	f.StringVar(&o.nvlinkDomain, "nvlink-domain", "", "NVLink domain of all this node's GPUs (e.g. the node's name on an NVSwitch system); empty: PCIe only")
	f.DurationVar(&o.pollWait, "poll-wait", 30*time.Second, "longest a poll for commands waits")
	f.DurationVar(&o.backoffMax, "backoff-max", 10*time.Second, "longest wait between retries while the control plane is away")
	f.IntVar(&o.maxEvents, "max-events", 10000, "events kept while the control plane is away (the oldest are dropped beyond)")
	f.BoolVar(&o.collect, "collect", false, "also sample this host's GPUs, as `prescient collect` does, naming each GPU process's job (the sink flags below)")
	addCollectSinkFlags(f, &o.sink)
	addKubeAgentFlags(f, &o.kube)
	return cmd
}

func (o agentOptions) validate() (nvml.Mode, error) {
	mode, err := nvml.ParseMode(o.nvml)
	if err != nil {
		return "", fmt.Errorf("--nvml: %w", err)
	}
	if u, err := url.Parse(o.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--server %q: want the control plane's http(s) URL, e.g. http://10.0.0.1:8080", o.server)
	}
	switch {
	case o.token == "":
		return "", errors.New("--token: empty; the control plane wants an agent token (env PRESCIENT_TOKEN)")
	case o.node == "":
		return "", errors.New("--node: want the node's name")
	case o.workDir == "":
		return "", errors.New("--work-dir: want a directory")
	case o.fleet != "" && mode != nvml.ModeSim:
		return "", fmt.Errorf("--fleet: simulates a node, which only --nvml sim does, not --nvml %s", mode)
	case o.pollWait <= 0:
		return "", fmt.Errorf("--poll-wait %s: want a positive duration", o.pollWait)
	case o.backoffMax <= 0:
		return "", fmt.Errorf("--backoff-max %s: want a positive duration", o.backoffMax)
	case o.maxEvents <= 0 || o.maxEvents > 10000:
		return "", fmt.Errorf("--max-events %d: want 1 to 10000", o.maxEvents)
	}
	return mode, nil
}

// agentReport is what agent prints when it stops.
type agentReport struct {
	Node        string  `json:"node"`
	NVML        string  `json:"nvml"`
	GPUs        int     `json:"gpus"`
	JobsStarted int     `json:"jobs_started"`
	JobsRunning int     `json:"jobs_running"`
	DurationS   float64 `json:"duration_s"`
}

func (r agentReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("node", r.Node)
	t.row("nvml", r.NVML)
	t.row("gpus", r.GPUs)
	t.row("jobs_started", r.JobsStarted)
	t.row("jobs_running", r.JobsRunning)
	t.row("duration_s", fmt.Sprintf("%.1f", r.DurationS))
	return t.flush()
}

func runAgent(ctx context.Context, g *globals, o agentOptions, stdout io.Writer) error {
	if o.kube.enabled {
		return runKubeAgent(ctx, g, o, stdout)
	}
	log := g.logger.With("component", "agent")
	mode, err := o.validate()
	if err != nil {
		return err
	}
	if o.collect {
		sink := o.sink
		sink.nvml, sink.node = o.nvml, o.node
		if _, err := sink.validate(); err != nil {
			return err
		}
	}
	start := time.Now()

	// 1. The host: its GPUs from NVML (real or simulated), its topology.
	host, sim, info, err := agentNode(mode, o, true)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer host.Close()
	backend := "real"
	cfg := agent.Config{Server: o.server, Token: o.token, Node: info, WorkDir: o.workDir,
		Logger: g.logger, PollWait: o.pollWait, BackoffMax: o.backoffMax, MaxEvents: o.maxEvents}
	if sim != nil {
		backend = "sim"
		cfg.Load = sim
	}
	if pl, ok := host.(nvml.PowerLimiter); ok {
		cfg.Power = pl // the plan's per-job power caps (serve --power-cap-price)
	}

	// 2. The agent, which takes over the jobs an earlier one left running.
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	log.Info("agent starting", "node", info.Name, "gpus", len(info.GPUs), "nvml", backend, "server", o.server, "work_dir", o.workDir, "collect", o.collect)

	// 3. The collector, when asked, sampling until the agent stops.
	var collectErr chan error
	if o.collect {
		collectErr = make(chan error, 1)
		go func() { collectErr <- runAgentCollector(ctx, g, o.sink, host, a) }()
	}

	// 4. Serve until SIGTERM; the jobs keep running.
	if err := a.Run(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if collectErr != nil {
		if err := <-collectErr; err != nil {
			return fmt.Errorf("agent: --collect: %w", err)
		}
	}
	running := len(a.Running())
	if running > 0 {
		log.Info("agent stopped; its jobs keep running and the next agent on this work dir takes them over", "running", running)
	}
	return g.print(stdout, agentReport{Node: info.Name, NVML: backend, GPUs: len(info.GPUs),
		JobsStarted: len(a.Jobs()), JobsRunning: running, DurationS: time.Since(start).Seconds()})
}

// runAgentCollector samples host until ctx ends, as collect does, with the
// agent naming the jobs of GPU processes.
func runAgentCollector(ctx context.Context, g *globals, o collectOptions, host nvml.Host, a collector.JobRegistry) error {
	sink, sinkName, closeStore, err := openSink(ctx, o, g.logger)
	if err != nil {
		return err
	}
	defer closeStore()
	reg := prometheus.NewRegistry()
	m := collector.NewMetrics(reg)
	spool, err := collector.OpenSpool(o.spoolDir, o.spoolMaxBytes, g.logger)
	if err != nil {
		return fmt.Errorf("--spool-dir: %w", err)
	}
	w := collector.NewWriter(sink, spool, collector.WriterOptions{BatchSize: o.batchSize, FlushInterval: o.flushInterval}, m, g.logger)
	stopMetrics, err := serveMetrics(o.metricsListen, reg, g.logger.With("component", "collect"))
	if err != nil {
		w.Close(context.Background())
		return err
	}
	defer stopMetrics()
	jobs := collector.JobRegistries{a, collector.ProcJobs{}}
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: o.node, Host: host}}, Jobs: jobs, TagLabels: o.labelTags,
		Interval: o.interval, Metrics: m, Logger: g.logger})
	if err != nil {
		w.Close(context.Background())
		return err
	}
	g.logger.Info("collecting", "component", "collect", "sink", sinkName, "interval", o.interval)
	runErr := c.Run(ctx, w, 0)
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(runErr, w.Close(closeCtx))
}

// agentNode opens the node's GPUs through NVML (the returned Sim is nil
// unless they are simulated) and describes them with the node's topology;
// simulated GPUs idle without a job where the agent assigns its jobs' load
// (assigns), and follow the stochastic load where it does not.
func agentNode(mode nvml.Mode, o agentOptions, assigns bool) (nvml.Host, *nvml.Sim, protocol.NodeInfo, error) {
	node := cluster.Node{Name: o.node, Topology: cluster.Topology{Rack: o.rack, Leaf: o.leaf}}
	if o.fleet != "" {
		fleet, err := datasets.ReadFleet(o.fleet)
		if err != nil {
			return nil, nil, protocol.NodeInfo{}, fmt.Errorf("--fleet: %w", err)
		}
		found := false
		for _, n := range fleet.Nodes {
			if n.Name == o.node {
				node, found = n, true
			}
		}
		if !found {
			return nil, nil, protocol.NodeInfo{}, fmt.Errorf("--node %s: not a node of --fleet %s", o.node, o.fleet)
		}
		node.Topology.Rack = nonEmpty(o.rack, node.Topology.Rack)
		node.Topology.Leaf = nonEmpty(o.leaf, node.Topology.Leaf)
	}
	// A simulated node whose agent assigns its jobs' load (assigns) idles
	// where it runs nothing; each node's noise is its own.
	seed := fnv.New64a()
	seed.Write([]byte(node.Name))
	host, sim, err := nvml.Open(mode, nvml.SimOptions{Node: node, Seed: seed.Sum64(), IdleUnassigned: assigns})
	if err != nil {
		if errors.Is(err, nvml.ErrNoLibrary) {
			return nil, nil, protocol.NodeInfo{}, fmt.Errorf("--nvml %s: %w (--nvml sim simulates GPUs)", mode, err)
		}
		return nil, nil, protocol.NodeInfo{}, fmt.Errorf("--nvml %s: %w", mode, err)
	}
	info, err := describeNode(host, node, o.nvlinkDomain)
	if err != nil {
		host.Close()
		return nil, nil, protocol.NodeInfo{}, fmt.Errorf("--nvml %s: %w", mode, err)
	}
	return host, sim, info, nil
}

// describeNode lists the host's GPUs (not their MIG devices, which mark
// their GPU MIG-enabled) with the node's topology.
func describeNode(host nvml.Host, node cluster.Node, nvlinkDomain string) (protocol.NodeInfo, error) {
	devs, err := host.Devices()
	if err != nil {
		return protocol.NodeInfo{}, err
	}
	info := protocol.NodeInfo{Name: node.Name, Rack: node.Topology.Rack, Leaf: node.Topology.Leaf, Labels: node.Labels,
		CPUMilli: node.CPUMilli, MemoryBytes: node.MemoryBytes}
	for _, d := range devs {
		di, err := d.Info()
		if err != nil {
			return protocol.NodeInfo{}, err
		}
		if di.MIG {
			for i := range info.GPUs {
				if info.GPUs[i].UUID == di.ParentUUID {
					info.GPUs[i].MIGEnabled = true
				}
			}
			continue
		}
		gi := protocol.GPUInfo{Index: di.Index, UUID: di.UUID, Model: di.Model, MemoryBytes: int64(di.MemoryTotalBytes), NVLinkDomain: nvlinkDomain}
		if gi.NVLinkDomain == "" && di.Index < len(node.GPUs) {
			gi.NVLinkDomain = node.GPUs[di.Index].NVLinkDomain
		}
		info.GPUs = append(info.GPUs, gi)
	}
	return info, nil
}
