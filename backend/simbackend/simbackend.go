package simbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/backend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Config configures a Backend.
type Config struct {
	// Duration is how much work a job needs in all (the whole run, not what
	// is left after a checkpoint). Required.
	Duration func(j *cluster.Job) time.Duration
	// CheckpointCost is how long a checkpoint takes to land after it is
	// asked for; zero means at once.
	CheckpointCost time.Duration
	// ExitCode gives a finished job's exit code; nil means 0 for all.
	ExitCode func(j *cluster.Job) int
	// Clock stamps events; nil means time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Duration == nil {
		errs = append(errs, errors.New("simbackend: no Duration function"))
	}
	if c.CheckpointCost < 0 {
		errs = append(errs, fmt.Errorf("simbackend: checkpoint cost %s is negative", c.CheckpointCost))
	}
	return errors.Join(errs...)
}

// run is one attempt that works.
type run struct {
	a        executor.Assignment
	node     string
	started  time.Time
	saved    time.Duration // progress at the start of the attempt
	need     time.Duration // total work
	finish   *time.Timer
	periodic *time.Timer
	ckpt     *time.Timer // a requested checkpoint being written
	stopped  bool
}

// Backend runs jobs as timers. It is safe for concurrent use.
type Backend struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	runs    map[cluster.JobID]*run
	started map[executor.RunningAttempt]bool // every (job, attempt) ever started
	events  *backend.Events
}

var _ executor.Backend = (*Backend)(nil)

// New returns a Backend.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ExitCode == nil {
		cfg.ExitCode = func(*cluster.Job) int { return 0 }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger.With("component", "simbackend")
	return &Backend{cfg: cfg, log: log, runs: map[cluster.JobID]*run{},
		started: map[executor.RunningAttempt]bool{}, events: backend.NewEvents("simbackend", 0, log)}, nil
}

// Start implements executor.Backend. A (job, attempt) that was started
// before is not started again; a job that runs another attempt is refused.
func (b *Backend) Start(_ context.Context, a executor.Assignment) error {
	if len(a.Allocations) == 0 {
		return fmt.Errorf("simbackend: start %s: no allocations", a.Job.ID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := executor.RunningAttempt{Job: a.Job.ID, Attempt: a.Attempt}
	if b.started[key] {
		b.log.Debug("start repeated; ignored", "job", a.Job.ID, "attempt", a.Attempt)
		return nil
	}
	if r, ok := b.runs[a.Job.ID]; ok {
		return fmt.Errorf("simbackend: start %s attempt %d: attempt %d runs", a.Job.ID, a.Attempt, r.a.Attempt)
	}
	b.started[key] = true
	now := b.cfg.Clock()
	r := &run{a: a, node: a.Allocations[0].GPU.Node, started: now, need: b.cfg.Duration(&a.Job)}
	if a.Resume != nil {
		r.saved = time.Duration(a.Resume.Step) * time.Millisecond
	}
	b.runs[a.Job.ID] = r
	b.emit(executor.JobEvent{Type: executor.JobStarted, Time: now, Node: r.node, Job: a.Job.ID, Attempt: a.Attempt})
	r.finish = time.AfterFunc(max(r.need-r.saved, 0), func() { b.finished(r) })
	if a.CheckpointEvery > 0 {
		b.schedulePeriodic(r)
	}
	return nil
}

func (b *Backend) schedulePeriodic(r *run) {
	r.periodic = time.AfterFunc(r.a.CheckpointEvery, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if r.stopped {
			return
		}
		b.checkpointed(r)
		b.schedulePeriodic(r)
	})
}

// progress is the work r has done by now.
func (b *Backend) progress(r *run) time.Duration {
	return min(r.saved+b.cfg.Clock().Sub(r.started), r.need)
}

// checkpointed reports a checkpoint of r's progress now; b.mu is held.
func (b *Backend) checkpointed(r *run) {
	now := b.cfg.Clock()
	step := b.progress(r).Milliseconds()
	cp := &cluster.Checkpoint{Time: now, Step: step, Path: fmt.Sprintf("sim://%s/%d", r.a.Job.ID, step)}
	b.emit(executor.JobEvent{Type: executor.JobCheckpointed, Time: now, Node: r.node, Job: r.a.Job.ID, Attempt: r.a.Attempt, Checkpoint: cp})
}

func (b *Backend) finished(r *run) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.stopped {
		return
	}
	b.end(r)
	b.emit(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Node: r.node, Job: r.a.Job.ID,
		Attempt: r.a.Attempt, ExitCode: b.cfg.ExitCode(&r.a.Job)})
}

// end stops r's timers and forgets it; b.mu is held.
func (b *Backend) end(r *run) {
	r.stopped = true
	for _, t := range []*time.Timer{r.finish, r.periodic, r.ckpt} {
		if t != nil {
			t.Stop()
		}
	}
	if b.runs[r.a.Job.ID] == r {
		delete(b.runs, r.a.Job.ID)
	}
}

// Checkpoint implements executor.Backend: the checkpoint lands after
// CheckpointCost.
func (b *Backend) Checkpoint(_ context.Context, job cluster.JobID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[job]
	if !ok {
		return fmt.Errorf("simbackend: checkpoint %s: not running", job)
	}
	if r.ckpt != nil {
		return nil // one is being written
	}
	r.ckpt = time.AfterFunc(b.cfg.CheckpointCost, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		r.ckpt = nil
		if !r.stopped {
			b.checkpointed(r)
		}
	})
	return nil
}

// Stop implements executor.Backend: the job stops at once (the simulated
// job handles SIGTERM immediately); it reports an exit with Stopped set.
// Stopping a job that does not run is not an error.
func (b *Backend) Stop(_ context.Context, job cluster.JobID, _ time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[job]
	if !ok {
		return nil
	}
	b.end(r)
	b.emit(executor.JobEvent{Type: executor.JobExited, Time: b.cfg.Clock(), Node: r.node, Job: job,
		Attempt: r.a.Attempt, ExitCode: -1, Stopped: true})
	return nil
}

// LoseNode simulates a node that goes away: its jobs stop without a word
// and are reported lost.
func (b *Backend) LoseNode(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.sortedRuns() {
		if r.node == node {
			b.end(r)
			b.emit(executor.JobEvent{Type: executor.JobLost, Time: b.cfg.Clock(), Node: node, Job: r.a.Job.ID,
				Attempt: r.a.Attempt, Message: "node " + node + " lost"})
		}
	}
}

// Sync reports a NodeSynced event for each of nodes, listing what runs
// there, as an agent does when it (re)connects.
func (b *Backend) Sync(nodes ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		b.emit(executor.JobEvent{Type: executor.NodeSynced, Time: b.cfg.Clock(), Node: n, Running: b.runningOn(n)})
	}
}

// Running lists the attempts that run on node.
func (b *Backend) Running(node string) []executor.RunningAttempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runningOn(node)
}

func (b *Backend) runningOn(node string) []executor.RunningAttempt {
	var out []executor.RunningAttempt
	for _, r := range b.sortedRuns() {
		if r.node == node {
			out = append(out, executor.RunningAttempt{Job: r.a.Job.ID, Attempt: r.a.Attempt})
		}
	}
	return out
}

func (b *Backend) sortedRuns() []*run {
	out := make([]*run, 0, len(b.runs))
	for _, r := range b.runs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y *run) int { return cmpID(x.a.Job.ID, y.a.Job.ID) })
	return out
}

func cmpID(a, b cluster.JobID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// emit queues an event for Watch; b.mu is held.
func (b *Backend) emit(e executor.JobEvent) { b.events.Emit(e) }

// Watch implements executor.Backend. Events that happened before it was
// called are delivered first; events a watcher whose ctx ended did not take
// stay queued for the next (see Rewatch).
func (b *Backend) Watch(ctx context.Context) (<-chan executor.JobEvent, error) {
	return b.events.Watch(ctx)
}

// Rewatch lets Watch be called again (a control plane that restarts in the
// same process, in tests); events not yet delivered stay queued.
func (b *Backend) Rewatch() { b.events.Rewatch() }

// Starts lists every attempt the backend ever started (each once), by job
// and attempt.
func (b *Backend) Starts() []executor.RunningAttempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]executor.RunningAttempt, 0, len(b.started))
	for ra := range b.started {
		out = append(out, ra)
	}
	slices.SortFunc(out, func(x, y executor.RunningAttempt) int {
		if c := cmpID(x.Job, y.Job); c != 0 {
			return c
		}
		return x.Attempt - y.Attempt
	})
	return out
}
