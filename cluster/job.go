package cluster

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// JobID identifies a job across the whole system.
type JobID string

// MilliGPU is a whole GPU in milli-GPUs, the unit of fractional GPU shares.
const MilliGPU = 1000

// Well-known label keys that traces and users fill when they know them.
const (
	LabelFramework = "framework"
	LabelModel     = "model"
	LabelBatchSize = "batch_size"
	LabelQoS       = "qos"
	LabelPartition = "partition"
)

// JobSpec is what a user asks for: everything about a job that is known when
// it is submitted.
type JobSpec struct {
	Name   string
	Tenant string
	User   string
	Tier   Tier

	// GPUs is the number of GPUs the job needs. Zero for a CPU-only job.
	GPUs int
	// GPUMilli is the share of each of its GPUs the job needs, in milli-GPUs:
	// MilliGPU (1000) for whole GPUs, less for a fractional job, which then
	// asks for exactly one GPU.
	GPUMilli int
	// GPUModels lists the GPU models the job may run on; empty means any.
	GPUModels []string
	// Nodes, when not nil, are the only nodes the job may run on, sorted:
	// a backend's constraints (a Kubernetes pod's node selector, affinity,
	// tolerations), set on the planner's copy of a queued job each cycle
	// and never stored. Empty and not nil: none will do.
	Nodes []string `json:"-"`
	// TasksApart, set like Nodes, puts each of a gang's tasks on a node of
	// its own (pods that repel each other by host).
	TasksApart bool `json:"-"`
	// TasksPerNode, set like Nodes, is the most of a gang's tasks each named
	// node may take (its room for their CPU and memory); a node it does not
	// name takes as many as its GPUs allow.
	TasksPerNode map[string]int `json:"-"`
	// NodePreference, set like Nodes, is how much more than a node it does
	// not name each node suits the job (a Kubernetes pod's preferred
	// affinity, in kube-scheduler's score units, where the placement's own
	// score spans 0-100): placements add it to their own score.
	NodePreference map[string]float64 `json:"-"`

	CPUMilli    int64 // host CPU, in milli-cores
	MemoryBytes int64 // host memory

	// Deadline is when the job must have finished; zero means none.
	Deadline time.Time
	// TimeLimit is the run time the user asked for (a Slurm or PBS time
	// limit, SWF's requested time): the job is killed when it runs longer.
	// Zero means none was given.
	TimeLimit time.Duration
	// GangSize is the number of tasks (pods, processes) that must start
	// together, all or none; 0 or 1 means the job is not a gang.
	GangSize int

	// Checkpointable jobs can save their state on request and resume from it.
	Checkpointable bool
	// CheckpointCost is how long writing one checkpoint takes.
	CheckpointCost time.Duration

	// Labels hold what else is known: framework, model, batch size, ...
	Labels map[string]string

	// Data is the dataset the job reads and where warm copies of it sit;
	// nil when it names none.
	Data *DataSource
}

// DataSource is a dataset a job reads: its name, its size, and the nodes
// and racks that hold a warm copy (a local cache, a rack's cache server),
// where the job would not have to fetch it.
type DataSource struct {
	Name  string
	Bytes int64
	Nodes []string
	Racks []string
}

// WarmOn reports whether a copy sits on node n or its rack.
func (d *DataSource) WarmOn(n *Node) bool {
	return d != nil && (slices.Contains(d.Nodes, n.Name) || (n.Topology.Rack != "" && slices.Contains(d.Racks, n.Topology.Rack)))
}

// MilliGPUs is the total GPU demand in milli-GPUs (GPUs × GPUMilli).
func (s JobSpec) MilliGPUs() int { return s.GPUs * s.GPUMilli }

// Fractional reports whether the job asks for a share of one GPU.
func (s JobSpec) Fractional() bool { return s.GPUs == 1 && s.GPUMilli < MilliGPU }

// Splits reports whether Tasks can split the job for nodes of perNode
// GPUs, without splitting it.
func (s JobSpec) Splits(perNode int) bool {
	if s.GangSize > 1 {
		return s.GPUs%s.GangSize == 0 && s.GPUs/s.GangSize <= perNode
	}
	return perNode > 0
}

// Tasks splits the job's GPUs into per-node tasks on nodes of at most
// perNode GPUs: a gang into GangSize equal tasks (false when they are not
// equal or one does not fit a node), another job larger than a node into
// whole nodes and a remainder.
func (s JobSpec) Tasks(perNode int) ([]int, bool) { return s.AppendTasks(nil, perNode) }

// AppendTasks is Tasks appending to dst: a planner that splits a job on
// every placement it tries passes a buffer of its own and allocates
// nothing.
func (s JobSpec) AppendTasks(dst []int, perNode int) ([]int, bool) {
	if !s.Splits(perNode) {
		return dst, false
	}
	g := s.GPUs
	if s.GangSize > 1 {
		for range s.GangSize {
			dst = append(dst, g/s.GangSize)
		}
		return dst, true
	}
	for ; g > perNode; g -= perNode {
		dst = append(dst, perNode)
	}
	return append(dst, g), true
}

// HasDeadline reports whether the job has a deadline.
func (s JobSpec) HasDeadline() bool { return !s.Deadline.IsZero() }

// AllowsModel reports whether the job may run on a GPU of the given model
// (ModelAllowed of its GPUModels).
func (s JobSpec) AllowsModel(model string) bool { return ModelAllowed(s.GPUModels, model) }

// TaskRoom is the most of the job's tasks the named node may take: one
// when they must be apart (TasksApart), else what TasksPerNode says, else
// no limit (math.MaxInt).
func (s *JobSpec) TaskRoom(node string) int {
	if s.TasksApart {
		return 1
	}
	if k, ok := s.TasksPerNode[node]; ok {
		return k
	}
	return math.MaxInt
}

// AllowsNode reports whether the job may run on the named node (Nodes).
func (s *JobSpec) AllowsNode(name string) bool { return NodeAllowed(s.Nodes, name) }

// NodeAllowed reports whether name is among nodes, a sorted list where nil
// allows every node.
func NodeAllowed(nodes []string, name string) bool {
	if nodes == nil {
		return true
	}
	_, ok := slices.BinarySearch(nodes, name)
	return ok
}

// ModelAllowed reports whether a GPU of model is among models. Naming no
// model allows any but a MIG instance (see MIGInstanceModel): those only
// take the jobs that ask for them.
func ModelAllowed(models []string, model string) bool {
	if len(models) == 0 {
		return !IsMIGInstanceModel(model)
	}
	return slices.Contains(models, model)
}

// Validate checks the spec for values no scheduler could honour. The error
// names the field.
func (s JobSpec) Validate() error {
	var errs []error
	if !s.Tier.Valid() {
		errs = append(errs, fmt.Errorf("tier: invalid value %d", int(s.Tier)))
	}
	if s.GPUs < 0 {
		errs = append(errs, fmt.Errorf("gpus: %d is negative", s.GPUs))
	}
	switch {
	case s.GPUs == 0 && s.GPUMilli != 0:
		errs = append(errs, fmt.Errorf("gpu_milli: %d set on a job with no GPUs", s.GPUMilli))
	case s.GPUs > 0 && (s.GPUMilli < 1 || s.GPUMilli > MilliGPU):
		errs = append(errs, fmt.Errorf("gpu_milli: %d is outside 1..%d", s.GPUMilli, MilliGPU))
	case s.GPUs > 1 && s.GPUMilli != MilliGPU:
		errs = append(errs, fmt.Errorf("gpu_milli: a fractional share (%d) needs exactly one GPU, not %d", s.GPUMilli, s.GPUs))
	}
	if s.CPUMilli < 0 {
		errs = append(errs, fmt.Errorf("cpu_milli: %d is negative", s.CPUMilli))
	}
	if s.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("memory_bytes: %d is negative", s.MemoryBytes))
	}
	if s.GangSize < 0 {
		errs = append(errs, fmt.Errorf("gang_size: %d is negative", s.GangSize))
	}
	if s.CheckpointCost < 0 {
		errs = append(errs, fmt.Errorf("checkpoint_cost: %s is negative", s.CheckpointCost))
	}
	if s.TimeLimit < 0 {
		errs = append(errs, fmt.Errorf("time_limit: %s is negative", s.TimeLimit))
	}
	if d := s.Data; d != nil {
		if d.Name == "" {
			errs = append(errs, errors.New("data.name: a dataset needs a name"))
		}
		if d.Bytes < 0 {
			errs = append(errs, fmt.Errorf("data.bytes: %d is negative", d.Bytes))
		}
		for i, n := range d.Nodes {
			if n == "" {
				errs = append(errs, fmt.Errorf("data.nodes[%d]: a warm copy's node needs a name", i))
			}
		}
		for i, r := range d.Racks {
			if r == "" {
				errs = append(errs, fmt.Errorf("data.racks[%d]: a warm copy's rack needs a name", i))
			}
		}
	}
	return errors.Join(errs...)
}

// Checkpoint is a saved state a job can resume from.
type Checkpoint struct {
	Time time.Time
	Step int64
	Path string
}

// Outcome is what became of a job that ran: what training learns from.
type Outcome struct {
	// RunTime is how long the job ran. Traces that know only the run time
	// (Philly) leave the job's StartTime and EndTime zero.
	RunTime time.Duration
	// PeakGPUMemoryBytes is the most GPU memory the job used on any one GPU;
	// zero when unknown.
	PeakGPUMemoryBytes int64
	// EnergyJ is the energy its GPUs used; zero when unknown.
	EnergyJ float64
	// ExitCode is the process's exit code where the job ran as one.
	ExitCode int
}

// Job is a submitted job: its spec plus where it is in its life.
type Job struct {
	ID         JobID
	Spec       JobSpec
	SubmitTime time.Time

	State JobState
	// Attempts counts the times the job was started.
	Attempts int
	// LastCheckpoint is the newest checkpoint the job wrote, if any.
	LastCheckpoint *Checkpoint

	StartTime time.Time // of the current or last attempt; zero if never started
	EndTime   time.Time // zero until the job is done
	Outcome   Outcome
}

// NewJob returns a queued job.
func NewJob(id JobID, spec JobSpec, submit time.Time) Job {
	return Job{ID: id, Spec: spec, SubmitTime: submit.UTC(), State: StateQueued}
}

// Clone returns a deep copy: the copy shares no checkpoint, model list or
// labels with j.
func (j Job) Clone() Job {
	if j.LastCheckpoint != nil {
		cp := *j.LastCheckpoint
		j.LastCheckpoint = &cp
	}
	j.Spec.GPUModels = slices.Clone(j.Spec.GPUModels)
	j.Spec.Labels = maps.Clone(j.Spec.Labels)
	if d := j.Spec.Data; d != nil {
		c := *d
		c.Nodes, c.Racks = slices.Clone(d.Nodes), slices.Clone(d.Racks)
		j.Spec.Data = &c
	}
	return j
}

// Validate checks the job's identity, times and spec.
func (j *Job) Validate() error {
	var errs []error
	if j.ID == "" {
		errs = append(errs, errors.New("id: empty"))
	}
	if j.SubmitTime.IsZero() {
		errs = append(errs, errors.New("submit_time: missing"))
	}
	if !j.State.Valid() {
		errs = append(errs, fmt.Errorf("state: %q is not a job state", j.State))
	}
	if j.Attempts < 0 {
		errs = append(errs, fmt.Errorf("attempts: %d is negative", j.Attempts))
	}
	if !j.StartTime.IsZero() && j.StartTime.Before(j.SubmitTime) {
		errs = append(errs, fmt.Errorf("start_time: %s is before submit_time %s", j.StartTime.Format(time.RFC3339), j.SubmitTime.Format(time.RFC3339)))
	}
	if j.Outcome.PeakGPUMemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("peak_gpu_memory_bytes: %d is negative", j.Outcome.PeakGPUMemoryBytes))
	}
	if e := j.Outcome.EnergyJ; e < 0 || math.IsNaN(e) || math.IsInf(e, 0) {
		errs = append(errs, fmt.Errorf("energy_j: %g is not a finite, non-negative number", e))
	}
	if j.Outcome.RunTime < 0 {
		errs = append(errs, fmt.Errorf("run_time: %s is negative", j.Outcome.RunTime))
	}
	if !j.StartTime.IsZero() && !j.EndTime.IsZero() && j.EndTime.Before(j.StartTime) {
		errs = append(errs, fmt.Errorf("end_time: %s is before start_time %s", j.EndTime.Format(time.RFC3339), j.StartTime.Format(time.RFC3339)))
	}
	if err := j.Spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Transition moves the job to state to at time at, enforcing the allowed
// transitions. Going to running counts an attempt; going back to queued
// (preemption, requeue, node failure) keeps the attempt count and the last
// checkpoint; a terminal state sets EndTime.
func (j *Job) Transition(to JobState, at time.Time) error {
	if !j.State.CanTransition(to) {
		return &TransitionError{Job: j.ID, From: j.State, To: to}
	}
	at = at.UTC()
	switch {
	case to == StateRunning && j.State == StateQueued:
		j.Attempts++
		j.StartTime = at
	case to.Terminal():
		j.EndTime = at
		if !j.StartTime.IsZero() {
			j.Outcome.RunTime += at.Sub(j.StartTime)
		}
	case to == StateQueued:
		// The time already run counts; the next attempt resumes from the
		// last checkpoint.
		if !j.StartTime.IsZero() {
			j.Outcome.RunTime += at.Sub(j.StartTime)
		}
		j.StartTime = time.Time{}
	}
	j.State = to
	return nil
}

// Checkpointed records a checkpoint that landed. It is allowed while the job
// runs or is checkpointing; a checkpointing job goes back to running.
func (j *Job) Checkpointed(cp Checkpoint) error {
	if !j.State.Active() {
		return fmt.Errorf("job %s: checkpoint reported while %s: %w", j.ID, j.State, ErrInvalidTransition)
	}
	cp.Time = cp.Time.UTC()
	j.LastCheckpoint = &cp
	if j.State == StateCheckpointing {
		return j.Transition(StateRunning, cp.Time)
	}
	return nil
}

// WorkSinceCheckpoint is the GPU-time a job would lose if it stopped at now:
// the time since its last checkpoint (or its start) times its GPUs.
func (j *Job) WorkSinceCheckpoint(now time.Time) time.Duration {
	if !j.State.Active() {
		return 0
	}
	since := j.StartTime
	if j.LastCheckpoint != nil && j.LastCheckpoint.Time.After(since) {
		since = j.LastCheckpoint.Time
	}
	gpus := j.Spec.GPUs
	if gpus == 0 {
		gpus = 1
	}
	return now.Sub(since) * time.Duration(gpus)
}
