package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/prescient-sched/prescient/agent"
	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

// demoFleetYAML is the demo's fleet, two node shapes as a lab has them:
// two DGX-A100-like nodes (8 SXM GPUs on one NVSwitch) and two PCIe nodes
// of 4 A40s joined in NVLink pairs. It is written to the demo directory
// (fleet.yaml) for the agents to read, and for a user to look at.
const demoFleetYAML = `# The demo's fleet (prescient serve --demo writes it; edits are overwritten).
name: demo
nodes:
  - name: node-001
    rack: rack-a
    gpus: {count: 8, model: A100-SXM4-80GB, nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]}
  - name: node-002
    rack: rack-a
    gpus: {count: 8, model: A100-SXM4-80GB, nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]}
  - name: node-003
    rack: rack-b
    cpu_milli: 64000
    memory: 512GiB
    gpus: {count: 4, model: A40, nvlink_domains: [[0, 1], [2, 3]]}
  - name: node-004
    rack: rack-b
    cpu_milli: 64000
    memory: 512GiB
    gpus: {count: 4, model: A40, nvlink_domains: [[0, 1], [2, 3]]}
# The synthetic stream's tenants and the admin token's (demo) share the 24
# GPUs in one cohort: each may always use its quota, borrows what the
# others leave idle, and takes it back by preempting borrowers.
tenants:
  - {name: demo, cohort: lab, quota_gpus: 4}
  - {name: tenant-01, cohort: lab, quota_gpus: 3}
  - {name: tenant-02, cohort: lab, quota_gpus: 4}
  - {name: tenant-03, cohort: lab, quota_gpus: 3}
  - {name: tenant-04, cohort: lab, quota_gpus: 2}
  - {name: tenant-05, cohort: lab, quota_gpus: 2}
  - {name: tenant-06, cohort: lab, quota_gpus: 1}
  - {name: tenant-07, cohort: lab, quota_gpus: 1}
  - {name: tenant-08, cohort: lab, quota_gpus: 1}
  - {name: tenant-09, cohort: lab, quota_gpus: 1}
  - {name: tenant-10, cohort: lab, quota_gpus: 1}
  - {name: tenant-11, cohort: lab, quota_gpus: 1}
`

type demoOptions struct {
	enabled bool
	dir     string
	// jobsPerMinute is the synthetic stream's mean arrival rate (0: none).
	jobsPerMinute float64
	// timeScale divides the synthetic jobs' durations: at 60 an hour of the
	// trace runs for a minute.
	timeScale float64
	token     string
	workload  string
	seed      int64
}

func addDemoFlags(f *pflag.FlagSet, o *demoOptions) {
	f.BoolVar(&o.enabled, "demo", false, "run the demo on this machine: simulated A100 and A40 nodes, local agents, real workload processes, a synthetic job stream (implies --mode autopilot --backend agent)")
	f.StringVar(&o.dir, "demo-dir", "", "with --demo: directory of the agents' work, the spool and the models (default: beside --db)")
	f.Float64Var(&o.jobsPerMinute, "demo-jobs-per-minute", 3, "with --demo: mean arrival rate of the synthetic jobs (0: submit none)")
	f.Float64Var(&o.timeScale, "demo-time-scale", 20, "with --demo: the synthetic jobs run this many times faster than the trace they come from")
	f.StringVar(&o.token, "demo-token", "", "with --demo: the admin token (default: a new random one, printed at start)")
	f.StringVar(&o.workload, "demo-workload", "", "with --demo: the prescient binary the agents run as the workload (default: this one)")
	_ = f.MarkHidden("demo-workload")
	f.Int64Var(&o.seed, "demo-seed", 1, "with --demo: seed of the synthetic history and job stream")
}

func (o demoOptions) validate() error {
	if !o.enabled {
		return nil
	}
	var errs []error
	if o.jobsPerMinute < 0 || o.jobsPerMinute > 600 {
		errs = append(errs, fmt.Errorf("--demo-jobs-per-minute %g: want 0 to 600", o.jobsPerMinute))
	}
	if o.timeScale < 1 {
		errs = append(errs, fmt.Errorf("--demo-time-scale %g: want at least 1", o.timeScale))
	}
	if o.token != "" && len(o.token) < api.MinTokenBytes {
		errs = append(errs, fmt.Errorf("--demo-token: want at least %d characters", api.MinTokenBytes))
	}
	return errors.Join(errs...)
}

// demoSetup is what --demo adds to serve.
type demoSetup struct {
	o          demoOptions
	g          *globals
	st         *store.Store
	fleet      *cluster.Fleet
	fleetSpec  string // the --fleet of its agents
	adminToken string
	agentToken string
	workload   string
	wg         sync.WaitGroup
}

// newDemo prepares the demo before the control plane starts: its tokens,
// and models trained on synthetic history when the registry has none.
func newDemo(ctx context.Context, g *globals, o *serveOptions, st *store.Store, tokens *api.Tokens) (*demoSetup, error) {
	d := &demoSetup{o: o.demo, g: g, st: st}
	if d.o.dir == "" {
		d.o.dir = filepath.Join(filepath.Dir(o.dbPath), "demo")
	}
	if err := os.MkdirAll(d.o.dir, 0o755); err != nil {
		return nil, fmt.Errorf("--demo-dir: %w", err)
	}
	path := filepath.Join(d.o.dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(demoFleetYAML), 0o644); err != nil {
		return nil, fmt.Errorf("the demo's fleet: %w", err)
	}
	d.fleetSpec = "yaml:" + path
	fleet, err := datasets.ReadFleet(d.fleetSpec)
	if err != nil {
		return nil, fmt.Errorf("the demo's fleet: %w", err)
	}
	d.fleet = fleet
	d.workload = d.o.workload
	if d.workload == "" {
		if d.workload, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the workload binary: %w", err)
		}
	}

	// Tokens: an admin for the dashboard and the API, one for the agents.
	d.adminToken = nonEmpty(d.o.token, api.GenerateToken())
	d.agentToken = api.GenerateToken()
	tokens.List = append(tokens.List, api.NewToken(d.adminToken, "demo", api.RoleAdmin), api.NewToken(d.agentToken, "", api.RoleAgent))
	tokens.List[len(tokens.List)-2].Name, tokens.List[len(tokens.List)-1].Name = "demo-admin", "demo-agents"
	if err := tokens.Validate(); err != nil {
		return nil, err
	}

	// Models trained on synthetic history, on the demo's time scale.
	if o.models == "" {
		o.models = filepath.Join(d.o.dir, "models")
	}
	if err := d.trainModels(ctx, training.Registry{Dir: o.models}); err != nil {
		return nil, err
	}
	return d, nil
}

// demoHistoryJobs is the size of the synthetic history the demo's models
// learn from.
const demoHistoryJobs = 2000

// demoLearners are fast enough to fit at start: the ensemble (it fits
// its members itself) and the baselines it is gated against.
var demoLearners = []string{models.EnsembleName, models.RollingMedianName, models.GlobalMedianName}

// trainModels fits duration and memory models on synthetic history unless
// the registry already serves them.
func (d *demoSetup) trainModels(ctx context.Context, reg training.Registry) error {
	if _, err := reg.Current(models.TargetDuration); err == nil {
		return nil
	}
	cfg := datasets.DefaultGenerateConfig()
	cfg.Seed, cfg.Jobs = d.o.seed, demoHistoryJobs
	cfg.Start = time.Now().UTC().Add(-30 * 24 * time.Hour).Truncate(time.Hour)
	jobs, err := datasets.Generate(cfg)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].Outcome.RunTime = d.scaled(jobs[i].Outcome.RunTime)
	}
	start := time.Now()
	for _, t := range []models.Target{models.TargetDuration, models.TargetMemory} {
		rep, err := training.TrainAndPublish(ctx, training.Config{Target: t, Learners: demoLearners, Seed: d.o.seed, Logger: d.g.logger}, jobs, reg)
		if err != nil {
			return fmt.Errorf("training the %s model on synthetic history: %w", t, err)
		}
		d.g.logger.Info("demo model trained", "component", "demo", "target", t, "version", rep.ModelVersion, "selected", rep.Selected)
	}
	d.g.logger.Info("demo models ready", "component", "demo", "jobs", len(jobs), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// scaled is a trace duration on the demo's clock: at least 20 s, at most
// 15 minutes.
func (d *demoSetup) scaled(t time.Duration) time.Duration {
	return min(max(time.Duration(float64(t)/d.o.timeScale), 20*time.Second), 15*time.Minute)
}

// start runs the agents, the collector and the job stream until ctx ends,
// and prints where to look.
func (d *demoSetup) start(ctx context.Context, server string, plane service.Service, stdout io.Writer) error {
	var hosts []collector.HostSource
	var regs collector.JobRegistries
	for _, n := range d.fleet.Nodes {
		opts := agentOptions{node: n.Name, fleet: d.fleetSpec}
		host, sim, info, err := agentNode(nvml.ModeSim, opts, true)
		if err != nil {
			return err
		}
		a, err := agent.New(agent.Config{Server: server, Token: d.agentToken, Node: info, WorkDir: filepath.Join(d.o.dir, "agents", n.Name),
			Logger: d.g.logger, Load: sim, BackoffMax: 2 * time.Second, PollWait: 10 * time.Second})
		if err != nil {
			host.Close()
			return err
		}
		hosts = append(hosts, collector.HostSource{Node: n.Name, Host: host})
		regs = append(regs, a)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer host.Close()
			if err := a.Run(ctx); err != nil && ctx.Err() == nil {
				d.g.logger.Error("demo agent stopped", "component", "demo", "node", info.Name, "err", err)
			}
			// The demo started its jobs: it leaves none behind. They
			// checkpoint on SIGTERM; the next demo resumes them.
			sctx, cancel := context.WithTimeout(context.Background(), demoStopGrace+5*time.Second)
			defer cancel()
			n, err := a.StopAll(sctx, demoStopGrace)
			if err != nil {
				d.g.logger.Error("demo jobs not all stopped", "component", "demo", "node", info.Name, "err", err)
			} else if n > 0 {
				d.g.logger.Info("demo jobs checkpointed and stopped", "component", "demo", "node", info.Name, "jobs", n)
			}
		}()
	}
	c, err := collector.New(collector.Config{Hosts: hosts, Jobs: append(regs, collector.ProcJobs{}), Interval: 5 * time.Second, Logger: d.g.logger})
	if err != nil {
		return err
	}
	spool, err := collector.OpenSpool(filepath.Join(d.o.dir, "spool"), 64<<20, d.g.logger)
	if err != nil {
		return err
	}
	w := collector.NewWriter(collector.NewEmbeddedSink(d.st), spool, collector.WriterOptions{}, nil, d.g.logger)
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		_ = c.Run(ctx, w, 0)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	}()
	go func() {
		defer d.wg.Done()
		d.stream(ctx, plane)
	}()
	fmt.Fprintf(stdout, "Prescient demo: %s, autopilot, %g jobs a minute.\n  dashboard and API: %s/\n  admin token:       %s\n",
		describeFleet(d.fleet), d.o.jobsPerMinute, server, d.adminToken)
	return nil
}

// describeFleet says what a fleet holds: "2 nodes × 8 A100-SXM4-80GB, 2
// nodes × 4 A40".
func describeFleet(f *cluster.Fleet) string {
	type shape struct {
		gpus  int
		model string
	}
	var order []shape
	count := map[shape]int{}
	for _, n := range f.Nodes {
		sh := shape{len(n.GPUs), ""}
		if len(n.GPUs) > 0 {
			sh.model = n.GPUs[0].Model
		}
		if count[sh] == 0 {
			order = append(order, sh)
		}
		count[sh]++
	}
	parts := make([]string, len(order))
	for i, sh := range order {
		parts[i] = fmt.Sprintf("%d nodes × %d %s", count[sh], sh.gpus, sh.model)
	}
	return strings.Join(parts, ", ")
}

// demoStopGrace is how long a demo job has to checkpoint and exit when the
// demo stops, before SIGKILL.
const demoStopGrace = 10 * time.Second

// wait returns once the demo's goroutines stopped (after ctx ended), its
// jobs' processes stopped with them (a kill -9 of serve leaves them
// running; the next demo's agents take them over).
func (d *demoSetup) wait() { d.wg.Wait() }

// stream submits synthetic jobs, drawn from the same generator as the
// models' history, at random (Poisson) times until ctx ends.
func (d *demoSetup) stream(ctx context.Context, plane service.Service) {
	if d.o.jobsPerMinute == 0 {
		return
	}
	cfg := datasets.DefaultGenerateConfig()
	cfg.Seed, cfg.Jobs = d.o.seed+time.Now().Unix(), 2000
	cfg.Start = time.Now().UTC()
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 7))
	for n := 0; ; n++ {
		jobs, err := datasets.Generate(cfg)
		if err != nil {
			d.g.logger.Error("demo job stream stopped", "component", "demo", "err", err)
			return
		}
		for i := range jobs {
			wait := time.Duration(rng.ExpFloat64() / d.o.jobsPerMinute * float64(time.Minute))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			req := d.request(jobs[i])
			if _, err := plane.Submit(ctx, req); err != nil && ctx.Err() == nil {
				d.g.logger.Warn("demo job refused", "component", "demo", "name", req.Spec.Name, "err", err)
			}
		}
		cfg.Seed++
	}
}

// request turns a synthetic job into a submission that runs prescient
// workload for the job's scaled duration.
func (d *demoSetup) request(j cluster.Job) service.SubmitRequest {
	spec := j.Clone().Spec
	spec.GPUs = min(spec.GPUs, 8) // one node of the demo's fleet
	spec.GangSize = 0
	spec.GPUModels = nil
	if spec.HasDeadline() {
		spec.Deadline = time.Now().UTC().Add(d.scaled(j.Spec.Deadline.Sub(j.SubmitTime)))
	}
	spec.Checkpointable, spec.CheckpointCost = true, time.Second
	dur := d.scaled(j.Outcome.RunTime)
	steps := max(int(dur/time.Second), 1)
	return service.SubmitRequest{Spec: spec, Command: []string{d.workload, "workload",
		"--steps", strconv.Itoa(steps), "--step-time", "1s", "--checkpoint-every", "15"}}
}
