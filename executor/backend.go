package executor

import (
	"context"
	"errors"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Assignment is what a backend starts: one attempt of a job on its GPU
// shares. A backend starts each (Job.ID, Attempt) at most once, however
// often it is asked, so a control plane that restarts and asks again starts
// nothing twice.
type Assignment struct {
	Job         cluster.Job
	Attempt     int
	Allocations []cluster.Allocation
	// CheckpointEvery is the interval at which the job should checkpoint;
	// zero means only on request.
	CheckpointEvery time.Duration
	// Resume is the checkpoint the attempt resumes from; nil starts afresh.
	Resume *cluster.Checkpoint
	// Command is the argv a node agent runs and Env what it adds to the
	// process's environment (service.SubmitRequest's); backends whose
	// workloads say what they run (simulator, Kubernetes) ignore them.
	Command []string
	Env     map[string]string
	// CheckpointSignal is the signal a checkpoint request sends the job's
	// process, by name ("SIGUSR1", "SIGUSR2", ...); "" means SIGUSR1.
	CheckpointSignal string
	// PowerLimitFraction is the attempt's power cap (the plan's
	// PowerCap.Fraction): the node sets each of its GPUs' power limit to
	// this fraction of the default while it runs; 0 leaves them uncapped.
	// Backends that cannot set limits (simulator, Kubernetes) ignore it.
	PowerLimitFraction float64
}

// JobEventType says what a backend saw happen to a job.
type JobEventType string

// The events a backend reports.
const (
	JobStarted      JobEventType = "started"      // the process (pod) runs
	JobCheckpointed JobEventType = "checkpointed" // a checkpoint landed (Checkpoint says which)
	JobExited       JobEventType = "exited"       // it ended on its own or was stopped (ExitCode, Stopped)
	JobLost         JobEventType = "lost"         // its node or GPU went away; it is not running any more
	// NodeSynced reports, when a node (re)joins, every job that runs on it
	// (Running). The node's list wins: a job the control plane believes runs
	// there but is not listed was lost; a listed job the control plane does
	// not expect there is stopped, unless the event says what it holds
	// (Holdings) and the control plane has the job queued: then it adopts
	// the attempt.
	NodeSynced JobEventType = "node_synced"
	// NodeSilent reports that a node's agent has not been heard from for
	// the backend's timeout. Its jobs may still run (the agent keeps them
	// running while it cannot reach the control plane); declaring them
	// lost is the control plane's call. A later NodeSynced says what runs.
	NodeSilent JobEventType = "node_silent"
)

// JobEvent is one thing a backend saw.
type JobEvent struct {
	Type    JobEventType
	Time    time.Time
	Node    string
	Job     cluster.JobID
	Attempt int
	// ExitCode is the process's exit status for JobExited (-1 when killed by
	// a signal); Stopped says the backend stopped it on request.
	ExitCode int
	Stopped  bool
	// Checkpoint is the checkpoint that landed, for JobCheckpointed.
	Checkpoint *cluster.Checkpoint
	// Running lists the node's jobs and attempts, for NodeSynced.
	Running []RunningAttempt
	// Holdings, for NodeSynced, are the GPUs each listed attempt holds on
	// the node, from a backend whose own records say (Kubernetes: the
	// API server is the truth of what runs where). A control plane that
	// took over without the attempt in its store adopts it from them.
	Holdings map[RunningAttempt][]cluster.Allocation
	Message  string
}

// RunningAttempt names one attempt of a job that runs.
type RunningAttempt struct {
	Job     cluster.JobID
	Attempt int
}

// InitialSyncer is implemented by a backend whose Watch has queued, when
// it returns, the events that say what runs on the fleet (its NodeSynced
// events): the control plane applies that many events before it plans,
// so its first plan does not hand out GPUs that run pods it has yet to
// hear of.
type InitialSyncer interface {
	InitialEvents() int
}

// Waiter is implemented by a backend some of whose queued jobs cannot start
// yet, whatever the plan: on Kubernetes, a job whose pods (a gang's
// members, a Job's replacement pod) do not all exist. The control plane
// leaves the jobs Waiting names out of its plans, so that no attempt is
// spent on a start that must fail.
type Waiter interface {
	Waiting(id cluster.JobID) bool
}

// NodeConstrainer is implemented by a backend whose jobs may run only on
// some nodes (Kubernetes: a pod's node selector, required node affinity,
// tolerations, its volumes' node affinity). AllowedNodes says, for a
// queued job, the nodes it may use, sorted, or constrained false when any
// will do; when none will, why names the constraints that rule each node
// out. The control plane puts the list on the planner's copy of the job
// (JobSpec.Nodes), so every placement plugin keeps to it.
//
// TaskLimits says how a queued gang's tasks may share nodes: apart when
// each must have a node of its own (Kubernetes: its pods' anti-affinity by
// host matches each other), and perNode the most tasks each named node has
// room for (its free CPU and memory); the control plane sets
// JobSpec.TasksApart and JobSpec.TasksPerNode by it.
//
// NodePreferences says how much more than an unnamed node each node suits
// the job (Kubernetes: preferred affinity, PreferNoSchedule taints,
// ScheduleAnyway spread, in kube-scheduler's score units), nil for no
// preference; the control plane sets JobSpec.NodePreference by it.
type NodeConstrainer interface {
	AllowedNodes(id cluster.JobID) (nodes []string, why string, constrained bool)
	TaskLimits(id cluster.JobID) (apart bool, perNode map[string]int)
	NodePreferences(id cluster.JobID) map[string]float64
}

// AttemptStopper is implemented by a backend that can stop one attempt of
// a job and leave a newer one running: the control plane stops an attempt
// it does not run (a node that came back still running a requeued job's
// old attempt) through it where the backend has it, and through Stop,
// which stops the newest, where it has not.
type AttemptStopper interface {
	StopAttempt(ctx context.Context, job cluster.JobID, attempt int, grace time.Duration) error
}

// LogReader is implemented by a backend that can read the end of an
// attempt's log where it ran: one LogTail per node asked, in that order,
// each with the text or why it is unavailable (a node gone or silent, an
// agent too old, no log kept), never an error for the whole. It returns
// when every node answered or ctx ends.
type LogReader interface {
	JobLog(ctx context.Context, job cluster.JobID, attempt int, nodes []string, maxBytes int) []LogTail
}

// LogTail is the end of an attempt's log on one node.
type LogTail struct {
	Node string
	Text string
	// Truncated is set when the log is longer than Text.
	Truncated bool
	// Unavailable says why there is no text; empty when there is.
	Unavailable string
}

// RunChecker is implemented by a backend that can tell at submit a job's
// command it could never run: the node agents need one. The control plane
// refuses such a job there, naming the field, instead of starting it to
// fail.
type RunChecker interface {
	CheckRun(command []string, env map[string]string) error
}

// ErrNodeNotReady is wrapped by a backend's Start when a node of the
// assignment is not (yet) reachable: after a control-plane restart its
// agent may not have registered again. The job may still run there; the
// node's NodeSynced will say.
var ErrNodeNotReady = errors.New("node not ready")

// ErrPlanStale is wrapped by a backend's Start when what the plan assumed
// no longer holds: on Kubernetes, a pod bound since to a node that the
// job's pods now may not join (pod anti-affinity, topology spread). The
// job goes back to the queue without counting a failed start, to be
// planned on what is there now.
var ErrPlanStale = errors.New("plan stale")

// Backend is how autopilot touches the fleet: node agents, Kubernetes, or
// the simulator. Start, Checkpoint and Stop are requests: what happened
// comes back through Watch. Every method is safe for concurrent use.
type Backend interface {
	Start(ctx context.Context, a Assignment) error
	// Checkpoint asks the job to save its state now.
	Checkpoint(ctx context.Context, job cluster.JobID) error
	// Stop stops the job: SIGTERM (or its equivalent), then SIGKILL after
	// grace.
	Stop(ctx context.Context, job cluster.JobID, grace time.Duration) error
	// Watch returns the stream of events; it is closed when ctx ends. It is
	// called once.
	Watch(ctx context.Context) (<-chan JobEvent, error)
}
