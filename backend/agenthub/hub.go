package agenthub

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Errors of the hub's Backend methods, for errors.Is.
var (
	// ErrUnknownNode: an assignment names a node whose agent never
	// registered.
	ErrUnknownNode = fmt.Errorf("no agent registered for the node (%w)", executor.ErrNodeNotReady)
	// ErrUnknownJob: Checkpoint or Stop of a job the hub did not start and
	// no agent reported.
	ErrUnknownJob = errors.New("job not known to any agent")
	// ErrInvalidAssignment: an assignment the agents cannot run.
	ErrInvalidAssignment = errors.New("invalid assignment")
)

// HubOptions configure a Hub.
type HubOptions struct {
	// PollWait bounds how long an agent's poll waits for commands; default
	// 30s.
	PollWait time.Duration
	// SilentAfter is how long an agent may go unheard before the hub
	// reports its node silent (NodeSilent); default 90s. An agent that is
	// polling counts as heard.
	SilentAfter time.Duration
	// FailStopGrace is the grace the other ranks of a multi-node job get
	// when one rank fails; default 30s.
	FailStopGrace time.Duration
	// MaxEvents bounds the events waiting for Watch's reader; default
	// 100000 (the oldest are dropped and logged).
	MaxEvents int
	Logger    *slog.Logger
	// Clock is read for last-seen times; default time.Now.
	Clock func() time.Time
	// BoundNode, when set, says which node a request's credentials are
	// bound to (ok false: any node): the hub answers 403 to a
	// registration, poll or events of another node, so that one node's
	// agent token cannot take another node's jobs. serve reads it from
	// the API's principal (an agent token with a node).
	BoundNode func(r *http.Request) (node string, ok bool)
	// Placement, when set, says where the control plane's record places
	// an attempt: its nodes in rank order (ok false: it places no such
	// attempt). The hub asks it of an attempt it did not start itself
	// (after a control-plane restart), so that no agent speaks for
	// another node's ranks then either. serve reads it from the store.
	Placement func(job string, attempt int) (nodes []string, ok bool)
}

// Hub is the control plane's side of the agent protocol: an
// executor.Backend that turns Start, Checkpoint and Stop into commands for
// the nodes' agents, and the HTTP handler the agents talk to (Handler).
//
// A job whose allocations span several nodes runs one process per node,
// each with PRESCIENT_RANK (its node's position among the allocations'
// nodes, in order of first appearance) and PRESCIENT_WORLD_SIZE. Its ranks'
// events are combined into the job's: started once every rank started;
// checkpointed when rank 0 (which writes the job's checkpoint) reports one;
// exited once, when the first rank fails (the others are then stopped with
// FailStopGrace) or when every rank has exited; lost once, when any rank is
// lost.
//
// An agent speaks only for its own ranks: an event or a running entry
// about an attempt placed on other nodes (by Start, or by
// HubOptions.Placement), or giving its node another rank, is refused
// and logged, so that one node's agent token can neither end, checkpoint
// nor stop another node's job.
//
// Silence: while Watch's context lives, a node whose agent was not heard
// from for SilentAfter is reported once as a NodeSilent event (and
// Nodes() shows it disconnected). Its jobs may still run; declaring them
// lost (JobLost) is the control plane's call. When the agent registers
// again, NodeSynced lists what runs there.
type Hub struct {
	opts HubOptions
	log  *slog.Logger
	id   string

	mu      sync.Mutex
	nodes   map[string]*hubNode
	jobs    map[attemptKey]*hubJob
	current map[cluster.JobID]int // the newest attempt of each job
	events  *backend.Events
	// ended lists the attempts that ended, oldest first; beyond
	// maxEndedAttempts the oldest are forgotten.
	ended []attemptKey
	// logs are the log commands waiting for their reply, by request ID.
	logs map[string]*logWait
}

// logWait is a log command waiting for node's reply.
type logWait struct {
	node  string
	reply chan protocol.LogReply // buffered: one reply
}

// maxEndedAttempts bounds the ended attempts the hub remembers (to send no
// start twice); the agents' state files remember longer.
const maxEndedAttempts = 100000

var (
	_ executor.Backend        = (*Hub)(nil)
	_ executor.AttemptStopper = (*Hub)(nil)
	_ executor.RunChecker     = (*Hub)(nil)
	_ executor.LogReader      = (*Hub)(nil)
)

// hubNode is one registered agent.
type hubNode struct {
	info      protocol.NodeInfo
	session   string
	instance  string
	lastSeq   int64 // newest event seq seen from instance
	lastSeen  time.Time
	polls     int // polls in flight
	connected bool
	cmds      []protocol.Command // not yet acknowledged by a later poll
	nextSeq   int64
	wake      chan struct{} // closed when a command is queued
	running   []protocol.RunningAttempt
	canLog    bool // its polls say it answers log commands
}

// hubJob is one attempt and its ranks.
type hubJob struct {
	ranks     map[string]*rankState // by node
	worldSize int
	placed    bool // ranks holds every node of the attempt: no other may join
	started   bool // started reported
	ended     bool // exited or lost reported
	stopping  bool
}

type rankState struct {
	rank     int
	started  bool
	exited   bool
	exitCode int
}

// NewHub makes a hub with no nodes.
func NewHub(o HubOptions) *Hub {
	if o.PollWait <= 0 {
		o.PollWait = 30 * time.Second
	}
	if o.SilentAfter <= 0 {
		o.SilentAfter = 90 * time.Second
	}
	if o.FailStopGrace <= 0 {
		o.FailStopGrace = 30 * time.Second
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = 100000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	log := o.Logger.With("component", "agent-hub")
	return &Hub{opts: o, log: log, id: newID(), events: backend.NewEvents("agent hub", o.MaxEvents, log),
		nodes: map[string]*hubNode{}, jobs: map[attemptKey]*hubJob{}, current: map[cluster.JobID]int{}, logs: map[string]*logWait{}}
}

// NodeStatus is a registered node as the hub sees it.
type NodeStatus struct {
	Node      cluster.Node
	Connected bool
	LastSeen  time.Time
	Running   []executor.RunningAttempt
}

// Nodes lists the registered nodes by name.
func (h *Hub) Nodes() []NodeStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]NodeStatus, 0, len(h.nodes))
	for _, n := range h.nodes {
		if n.session == "" {
			continue // known from posted events only; it has not registered yet
		}
		out = append(out, NodeStatus{Node: n.info.ClusterNode(), Connected: n.connected, LastSeen: n.lastSeen, Running: toRunning(n.running)})
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return cmpString(a.Node.Name, b.Node.Name) })
	return out
}

// Start sends one start command per node of the assignment's allocations.
// The same (job, attempt) again sends nothing.
func (h *Hub) Start(ctx context.Context, a executor.Assignment) error {
	if err := checkAssignment(a); err != nil {
		return fmt.Errorf("start %s attempt %d: %w: %w", a.Job.ID, a.Attempt, ErrInvalidAssignment, err)
	}
	key := attemptKey{string(a.Job.ID), a.Attempt}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.jobs[key]; ok {
		return nil
	}
	// 1. The nodes in order of first appearance, and each one's GPUs.
	var order []string
	gpus := map[string][]int{}
	for _, al := range a.Allocations {
		if _, ok := gpus[al.GPU.Node]; !ok {
			order = append(order, al.GPU.Node)
		}
		if !slices.Contains(gpus[al.GPU.Node], al.GPU.Index) {
			gpus[al.GPU.Node] = append(gpus[al.GPU.Node], al.GPU.Index)
		}
	}
	for _, n := range order {
		if node, ok := h.nodes[n]; !ok || node.session == "" {
			return fmt.Errorf("start %s attempt %d: node %s: %w", a.Job.ID, a.Attempt, n, ErrUnknownNode)
		}
	}
	// 2. One start command per node.
	job := &hubJob{ranks: map[string]*rankState{}, worldSize: len(order), placed: true}
	for rank, n := range order {
		slices.Sort(gpus[n])
		spec := &protocol.StartSpec{GPUs: gpus[n], Command: slices.Clone(a.Command), Env: maps.Clone(a.Env),
			CheckpointSignal: a.CheckpointSignal, CheckpointEveryS: a.CheckpointEvery.Seconds(),
			Rank: rank, WorldSize: len(order), Labels: maps.Clone(a.Job.Spec.Labels), PowerLimitFraction: a.PowerLimitFraction}
		if a.Resume != nil {
			spec.ResumeStep, spec.ResumePath = a.Resume.Step, a.Resume.Path
		}
		h.enqueueLocked(n, protocol.Command{Type: protocol.CommandStart, Job: string(a.Job.ID), Attempt: a.Attempt, Start: spec})
		job.ranks[n] = &rankState{rank: rank}
	}
	h.jobs[key] = job
	h.current[a.Job.ID] = max(h.current[a.Job.ID], a.Attempt)
	h.log.Info("start sent", "job", a.Job.ID, "attempt", a.Attempt, "nodes", order)
	return nil
}

// CheckRun refuses a command no agent could run, naming the field
// (executor.RunChecker): none at all, or one the start spec refuses.
func (h *Hub) CheckRun(command []string, env map[string]string) error {
	if len(command) == 0 {
		return errors.New("command: empty; the agent backend runs a job's command on its nodes")
	}
	return protocol.StartSpec{Command: command, Env: env, GPUs: []int{0}, WorldSize: 1}.Validate()
}

// checkAssignment rejects what no agent could run, naming the field.
func checkAssignment(a executor.Assignment) error {
	if err := protocol.CheckID("job.id", string(a.Job.ID)); err != nil {
		return err
	}
	if a.Attempt < 0 {
		return fmt.Errorf("attempt: %d is negative", a.Attempt)
	}
	if len(a.Allocations) == 0 {
		return errors.New("allocations: none; the agent backend runs jobs on GPUs")
	}
	for i, al := range a.Allocations {
		if err := protocol.CheckName(fmt.Sprintf("allocations[%d].gpu.node", i), al.GPU.Node); err != nil {
			return err
		}
	}
	if a.CheckpointEvery < 0 {
		return fmt.Errorf("checkpoint_every: %s is negative", a.CheckpointEvery)
	}
	spec := protocol.StartSpec{Command: a.Command, Env: a.Env, CheckpointSignal: a.CheckpointSignal, Rank: 0, WorldSize: 1,
		PowerLimitFraction: a.PowerLimitFraction}
	for _, al := range a.Allocations {
		spec.GPUs = append(spec.GPUs, al.GPU.Index)
	}
	spec.GPUs = slices.Compact(slices.Sorted(slices.Values(spec.GPUs)))
	return spec.Validate()
}

// Checkpoint asks every rank of the job's newest attempt to checkpoint.
func (h *Hub) Checkpoint(ctx context.Context, job cluster.JobID) error {
	return h.toRanks(job, -1, "checkpoint", func(att int) protocol.Command {
		return protocol.Command{Type: protocol.CommandCheckpoint, Job: string(job), Attempt: att}
	})
}

// Stop stops every rank of the job's newest attempt: SIGTERM, then SIGKILL
// after grace.
func (h *Hub) Stop(ctx context.Context, job cluster.JobID, grace time.Duration) error {
	return h.StopAttempt(ctx, job, -1, grace)
}

// StopAttempt stops every rank of one attempt of the job (-1: its newest)
// and leaves the others running: the control plane's word for an attempt
// it does not run, while a newer one may run elsewhere
// (executor.AttemptStopper).
func (h *Hub) StopAttempt(ctx context.Context, job cluster.JobID, attempt int, grace time.Duration) error {
	if grace < 0 {
		return fmt.Errorf("stop %s: grace %s is negative", job, grace)
	}
	return h.toRanks(job, attempt, "stop", func(att int) protocol.Command {
		return protocol.Command{Type: protocol.CommandStop, Job: string(job), Attempt: att, GraceS: grace.Seconds()}
	})
}

// toRanks queues cmd for every rank of the attempt (-1: the newest) that
// has not exited.
func (h *Hub) toRanks(job cluster.JobID, attempt int, what string, cmd func(attempt int) protocol.Command) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	att, ok := h.current[job]
	if attempt >= 0 {
		att, ok = attempt, true
	}
	j := h.jobs[attemptKey{string(job), att}]
	if !ok || j == nil {
		return fmt.Errorf("%s %s: %w", what, job, ErrUnknownJob)
	}
	if what == "stop" {
		j.stopping = true
	}
	for n, r := range j.ranks {
		if !r.exited {
			h.enqueueLocked(n, cmd(att))
		}
	}
	return nil
}

// JobLog implements executor.LogReader: it sends each node a log command
// and waits for the replies until ctx ends.
func (h *Hub) JobLog(ctx context.Context, job cluster.JobID, attempt int, nodes []string, maxBytes int) []executor.LogTail {
	maxBytes = min(max(maxBytes, 1), protocol.MaxLogBytes)
	out := make([]executor.LogTail, len(nodes))
	waits := make([]*logWait, len(nodes))
	ids := make([]string, len(nodes))
	h.mu.Lock()
	for i, name := range nodes {
		out[i].Node = name
		n := h.nodes[name]
		switch {
		case n == nil || n.session == "":
			out[i].Unavailable = fmt.Sprintf("no agent of node %s is registered (the node may be gone)", name)
		case !n.connected:
			out[i].Unavailable = fmt.Sprintf("the agent of node %s is silent since %s", name, n.lastSeen.UTC().Format(time.RFC3339))
		case !n.canLog:
			out[i].Unavailable = fmt.Sprintf("the agent of node %s is too old to send logs", name)
		default:
			ids[i], waits[i] = newID(), &logWait{node: name, reply: make(chan protocol.LogReply, 1)}
			h.logs[ids[i]] = waits[i]
			h.enqueueLocked(name, protocol.Command{Type: protocol.CommandLog, Job: string(job), Attempt: attempt,
				Log: &protocol.LogSpec{ID: ids[i], MaxBytes: maxBytes}})
		}
	}
	h.mu.Unlock()
	for i, w := range waits {
		if w == nil {
			continue
		}
		select {
		case r := <-w.reply:
			out[i].Text, out[i].Truncated, out[i].Unavailable = r.Text, r.Truncated, r.Error
		case <-ctx.Done():
			out[i].Unavailable = fmt.Sprintf("the agent of node %s did not answer in time", nodes[i])
		}
	}
	// Forget the requests, and the commands no poll took yet.
	h.mu.Lock()
	for i, id := range ids {
		if id == "" {
			continue
		}
		delete(h.logs, id)
		if n := h.nodes[nodes[i]]; n != nil {
			n.cmds = slices.DeleteFunc(n.cmds, func(c protocol.Command) bool { return c.Log != nil && c.Log.ID == id })
		}
	}
	h.mu.Unlock()
	return out
}

// logReply hands node's reply to the request waiting for it; false when
// none waits (it ended, or the ID names another node's request).
func (h *Hub) logReply(node string, r protocol.LogReply) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.logs[r.ID]
	if w == nil || w.node != node {
		return false
	}
	delete(h.logs, r.ID)
	w.reply <- r
	return true
}

// enqueueLocked queues a command for node n and wakes its poll; h.mu is
// held.
func (h *Hub) enqueueLocked(n string, c protocol.Command) {
	node := h.nodes[n]
	if node == nil {
		return
	}
	node.nextSeq++
	c.Seq = node.nextSeq
	node.cmds = append(node.cmds, c)
	close(node.wake)
	node.wake = make(chan struct{})
}

// Watch streams the events; it also watches for silent agents while ctx
// lives. It may be called once.
func (h *Hub) Watch(ctx context.Context) (<-chan executor.JobEvent, error) {
	out, err := h.events.Watch(ctx)
	if err != nil {
		return nil, err
	}
	go h.watchSilence(ctx)
	return out, nil
}

func (h *Hub) watchSilence(ctx context.Context) {
	t := time.NewTicker(max(h.opts.SilentAfter/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := h.opts.Clock()
		h.mu.Lock()
		for name, n := range h.nodes {
			if n.connected && n.polls == 0 && now.Sub(n.lastSeen) > h.opts.SilentAfter {
				n.connected = false
				h.log.Warn("agent silent: its jobs may still run", "node", name, "last_seen", n.lastSeen, "silent_after", h.opts.SilentAfter)
				h.emitLocked(executor.JobEvent{Type: executor.NodeSilent, Time: now.UTC(), Node: name,
					Running: toRunning(n.running),
					Message: fmt.Sprintf("no word from the agent since %s", n.lastSeen.UTC().Format(time.RFC3339))})
			}
		}
		h.mu.Unlock()
	}
}

// emitLocked queues an event for Watch; h.mu is held.
func (h *Hub) emitLocked(e executor.JobEvent) { h.events.Emit(e) }

// register takes an agent's registration: its events first, then its
// running list, reported as NodeSynced.
func (h *Hub) register(r protocol.RegisterRequest) protocol.RegisterResponse {
	now := h.opts.Clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.nodes[r.Node.Name]
	if n == nil {
		n = &hubNode{wake: make(chan struct{})}
		h.nodes[r.Node.Name] = n
		h.log.Info("node registered", "node", r.Node.Name, "gpus", len(r.Node.GPUs))
	}
	n.info, n.session, n.lastSeen, n.connected = r.Node, newID(), now, true
	h.eventsLocked(r.Node.Name, r.Instance, r.Events)

	// The node's list wins: what it runs is known to run there (a control
	// plane that restarted learns where to send Stop), what it does not
	// list does not.
	listed := map[attemptKey]bool{}
	running := make([]protocol.RunningAttempt, 0, len(r.Running))
	for _, ra := range r.Running {
		key := attemptKey{ra.Job, ra.Attempt}
		j, rs, ok := h.rankLocked(key, r.Node.Name, ra.Rank, ra.WorldSize, "running")
		if !ok {
			continue
		}
		running = append(running, ra)
		listed[key] = true
		if rs.exited {
			*rs = rankState{rank: ra.Rank}
		}
		rs.started = true
		j.started = j.started || allStarted(j)
	}
	n.running = running
	for key, j := range h.jobs {
		if rs := j.ranks[r.Node.Name]; rs != nil && rs.started && !rs.exited && !listed[key] {
			rs.exited, rs.exitCode = true, -1
		}
	}
	h.emitLocked(executor.JobEvent{Type: executor.NodeSynced, Time: now.UTC(), Node: r.Node.Name, Running: toRunning(running)})
	return protocol.RegisterResponse{Session: n.session, Hub: h.id, PollWaitS: h.opts.PollWait.Seconds()}
}

// eventsLocked takes an agent's events, dropping those already seen and
// those about other nodes' ranks; h.mu is held. It returns how many it
// took.
func (h *Hub) eventsLocked(node, instance string, events []protocol.Event) int {
	n := h.nodes[node]
	if n == nil {
		// The control plane restarted and the agent posts before it
		// registers again: take the events, register comes next.
		n = &hubNode{wake: make(chan struct{}), info: protocol.NodeInfo{Name: node}}
		h.nodes[node] = n
	}
	if n.instance != instance {
		n.instance, n.lastSeq = instance, 0
	}
	n.lastSeen = h.opts.Clock()
	accepted := 0
	for _, e := range events {
		if e.Seq <= n.lastSeq {
			continue
		}
		n.lastSeq = e.Seq
		if h.combineLocked(node, e) {
			accepted++
		}
	}
	return accepted
}

// combineLocked turns one rank's event into the job's (see Hub); h.mu is
// held. It reports false for an event it refused.
func (h *Hub) combineLocked(node string, e protocol.Event) bool {
	key := attemptKey{e.Job, e.Attempt}
	j, rs, ok := h.rankLocked(key, node, e.Rank, e.WorldSize, string(e.Type))
	if !ok {
		return false
	}
	je := executor.JobEvent{Time: e.Time.UTC(), Node: node, Job: cluster.JobID(e.Job), Attempt: e.Attempt, Message: e.Message}
	if n := h.nodes[node]; n != nil {
		ra := protocol.RunningAttempt{Job: e.Job, Attempt: e.Attempt, Rank: e.Rank, WorldSize: e.WorldSize}
		n.running = slices.DeleteFunc(n.running, func(r protocol.RunningAttempt) bool { return r.Job == ra.Job && r.Attempt == ra.Attempt })
		if e.Type == protocol.EventStarted || e.Type == protocol.EventCheckpointed {
			n.running = append(n.running, ra)
		}
	}
	switch e.Type {
	case protocol.EventStarted:
		rs.started = true
		if !j.started && allStarted(j) {
			j.started = true
			je.Type = executor.JobStarted
			h.emitLocked(je)
		}
	case protocol.EventCheckpointed:
		if rs.rank == 0 && !j.ended {
			je.Type = executor.JobCheckpointed
			je.Checkpoint = &cluster.Checkpoint{Time: e.Checkpoint.Time.UTC(), Step: e.Checkpoint.Step, Path: e.Checkpoint.Path}
			h.emitLocked(je)
		}
	case protocol.EventExited:
		rs.exited, rs.exitCode = true, e.ExitCode
		failed := e.ExitCode != 0 && !e.Stopped
		if j.ended || !(failed || allExited(j)) {
			return true
		}
		h.endLocked(key, j)
		je.Type, je.ExitCode, je.Stopped = executor.JobExited, e.ExitCode, e.Stopped || j.stopping
		if !failed {
			je.ExitCode = firstExitCode(j)
		}
		if j.worldSize > 1 {
			je.Message = fmt.Sprintf("rank %d of %d: %s", rs.rank, j.worldSize, e.Message)
		}
		h.emitLocked(je)
		if failed {
			for n, other := range j.ranks {
				if !other.exited {
					h.enqueueLocked(n, protocol.Command{Type: protocol.CommandStop, Job: e.Job, Attempt: e.Attempt, GraceS: h.opts.FailStopGrace.Seconds()})
				}
			}
		}
	case protocol.EventLost:
		rs.exited, rs.exitCode = true, -1
		if !j.ended {
			h.endLocked(key, j)
			je.Type = executor.JobLost
			h.emitLocked(je)
		}
	}
	return true
}

// rankLocked returns the attempt and the node's rank in it that an agent
// speaks of (an event, a running entry), making them where the hub knew
// neither; h.mu is held. ok is false, and it logs why, when the attempt is
// placed on other nodes or gives the node another rank or world size: an
// agent speaks only for its own ranks.
func (h *Hub) rankLocked(key attemptKey, node string, rank, worldSize int, what string) (*hubJob, *rankState, bool) {
	j := h.jobs[key]
	if j == nil { // started by an earlier control plane, or not at all
		j = &hubJob{ranks: map[string]*rankState{}, worldSize: worldSize}
		if h.opts.Placement != nil {
			if nodes, ok := h.opts.Placement(key.job, key.attempt); ok && len(nodes) > 0 {
				for r, n := range nodes {
					j.ranks[n] = &rankState{rank: r}
				}
				j.placed, j.worldSize = true, len(nodes)
			}
		}
		h.jobs[key] = j
		if j.placed || h.opts.Placement == nil {
			// An attempt the record does not place never becomes the
			// job's newest: Stop and Checkpoint keep to the one it runs.
			h.current[cluster.JobID(key.job)] = max(h.current[cluster.JobID(key.job)], key.attempt)
		}
	}
	rs := j.ranks[node]
	switch {
	case rs == nil && j.placed:
		h.log.Warn("agent refused: it spoke of an attempt placed on other nodes", "node", node, "about", what,
			"job", key.job, "attempt", key.attempt, "nodes", slices.Sorted(maps.Keys(j.ranks)))
		return nil, nil, false
	case rs != nil && rs.rank != rank, worldSize != j.worldSize:
		h.log.Warn("agent refused: it gave its node another rank of the attempt", "node", node, "about", what,
			"job", key.job, "attempt", key.attempt, "rank", rank, "world_size", worldSize, "want_world_size", j.worldSize)
		return nil, nil, false
	}
	if rs == nil {
		rs = &rankState{rank: rank}
		j.ranks[node] = rs
	}
	return j, rs, true
}

// endLocked marks an attempt ended and forgets the oldest ended ones
// beyond maxEndedAttempts; h.mu is held.
func (h *Hub) endLocked(key attemptKey, j *hubJob) {
	j.ended = true
	h.ended = append(h.ended, key)
	for len(h.ended) > maxEndedAttempts {
		old := h.ended[0]
		h.ended = h.ended[1:]
		if oj := h.jobs[old]; oj != nil && oj.ended {
			delete(h.jobs, old)
			if h.current[cluster.JobID(old.job)] == old.attempt {
				delete(h.current, cluster.JobID(old.job))
			}
		}
	}
}

func allStarted(j *hubJob) bool {
	n := 0
	for _, r := range j.ranks {
		if r.started {
			n++
		}
	}
	return n >= j.worldSize
}

func allExited(j *hubJob) bool {
	n := 0
	for _, r := range j.ranks {
		if r.exited {
			n++
		}
	}
	return n >= j.worldSize
}

// firstExitCode is the lowest rank's non-zero exit code, else 0.
func firstExitCode(j *hubJob) int {
	best, code := -1, 0
	for _, r := range j.ranks {
		if r.exitCode != 0 && (best < 0 || r.rank < best) {
			best, code = r.rank, r.exitCode
		}
	}
	return code
}

func toRunning(rs []protocol.RunningAttempt) []executor.RunningAttempt {
	out := make([]executor.RunningAttempt, len(rs))
	for i, r := range rs {
		out[i] = executor.RunningAttempt{Job: cluster.JobID(r.Job), Attempt: r.Attempt}
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// attemptKey names one attempt of a job in the hub's maps.
type attemptKey struct {
	job     string
	attempt int
}

// newID is a random session ID.
func newID() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
