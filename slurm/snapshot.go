package slurm

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Job is a job as squeue --json reports it.
type Job struct {
	ID                                  string
	User, Account, Partition, QOS, Name string
	State                               string // PENDING, RUNNING, ...
	Reason                              string // why it pends: Priority, Resources, JobHeldAdmin, ...
	Submit, Start, End                  time.Time
	TimeLimit                           time.Duration // zero: none (UNLIMITED)
	Nice                                int
	Priority                            int64
	AdminComment                        string
	// Tasks are a pending job array's tasks this record stands for (its
	// array_task_string: "1-20", "1,3,5%2"), 0 or 1 for a job; MaxTasks
	// is how many of them may run at once (0: no limit). A running task
	// is a job of its own. ArrayTasks is the string as Slurm wrote it.
	Tasks, MaxTasks         int
	ArrayTasks              string
	GPUs, CPUs, MemoryBytes int64 // in all, allocated (running) or requested
	Nodes                   string
}

// Pending and Running say what the job is doing.
func (j Job) Pending() bool { return j.State == "PENDING" }
func (j Job) Running() bool { return j.State == "RUNNING" }

// Partitions are the partitions the job may run in: the one it runs in,
// or those it pends in ("gpu,debug": either).
func (j Job) Partitions() []string { return strings.Split(j.Partition, ",") }

// Live says whether the job is pending or running.
func (j Job) Live() bool { return j.Pending() || j.Running() }

// Held says whether the job is held (priority 0).
func (j Job) Held() bool { return j.Pending() && strings.HasPrefix(j.Reason, "JobHeld") }

// Spec is j's spec in the job model (Spec).
func (j Job) Spec() cluster.JobSpec {
	return Spec(j.User, j.Account, j.Name, j.Partition, j.QOS, TRES{GPUs: j.GPUs, CPUs: j.CPUs, MemoryBytes: j.MemoryBytes}, j.TimeLimit)
}

// Node is a node as sinfo --json reports it.
type Node struct {
	Name string
	// States are the base state first (IDLE, MIXED, ALLOCATED, DOWN, ...),
	// then the flags (DRAIN, POWERED_DOWN, POWERING_DOWN, POWERING_UP,
	// NOT_RESPONDING, ...), upper-cased.
	States         []string
	GPUs, GPUsUsed int64
	CPUs, CPUsUsed int64
	Partitions     []string
	Reason         string
}

// Has says whether the node is in state or has flag s.
func (n *Node) Has(s string) bool { return slices.Contains(n.States, s) }

// Parked says whether the node is powered down or on its way there.
func (n *Node) Parked() bool { return n.Has("POWERED_DOWN") || n.Has("POWERING_DOWN") }

// Idle says whether the node runs nothing and is up for work.
func (n *Node) Idle() bool {
	return n.Has("IDLE") && n.CPUsUsed == 0 && !n.Parked() && !n.Has("POWERING_UP") && !n.Has("DRAIN") &&
		!n.Has("DOWN") && !n.Has("NOT_RESPONDING")
}

// slurmErrors is the errors list every Slurm JSON document carries. A
// command that cannot reach slurmctld still exits 0, with no jobs or
// nodes and an error here: read as a queue, that would be an empty one.
type slurmErrors struct {
	Errors []struct {
		Error       string          `json:"error"`
		Number      json.RawMessage `json:"error_number"`
		Description string          `json:"description"`
		Source      string          `json:"source"`
	} `json:"errors"`
}

// errEmptyResult is ESLURM_REST_EMPTY_RESULT, "Nothing found": how sacct
// --json says a query matched no job, which is no error.
const errEmptyResult = 9003

// err is the document's errors as one error, nil when there are none.
func (d *slurmErrors) err(what string) error {
	var msgs []string
	for _, e := range d.Errors {
		if n, ok, _ := Number(e.Number); (ok && n == errEmptyResult) || e.Description == "Nothing found" {
			continue
		}
		msgs = append(msgs, strings.TrimSpace(strings.Join([]string{e.Source, e.Description, e.Error}, ": ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: Slurm reported %s", what, strings.Join(msgs, "; "))
}

// squeueJSON is the part of squeue --json read; fields that changed shape
// between data parser versions are raw.
type squeueJSON struct {
	slurmErrors
	Jobs []struct {
		JobID        json.RawMessage `json:"job_id"`
		User         string          `json:"user_name"`
		Account      string          `json:"account"`
		Partition    string          `json:"partition"`
		QOS          string          `json:"qos"`
		Name         string          `json:"name"`
		State        json.RawMessage `json:"job_state"`
		Reason       string          `json:"state_reason"`
		Submit       json.RawMessage `json:"submit_time"`
		Start        json.RawMessage `json:"start_time"`
		End          json.RawMessage `json:"end_time"`
		TimeLimit    json.RawMessage `json:"time_limit"`
		Nice         json.RawMessage `json:"nice"`
		Priority     json.RawMessage `json:"priority"`
		AdminComment string          `json:"admin_comment"`
		TRESReq      string          `json:"tres_req_str"`
		TRESAlloc    string          `json:"tres_alloc_str"`
		Nodes        string          `json:"nodes"`
		ArrayTasks   string          `json:"array_task_string"`
		ArrayMax     json.RawMessage `json:"array_max_tasks"`
	} `json:"jobs"`
}

// ParseJobs reads squeue --json. A job it cannot make sense of is an error
// naming the job's index and field, and so is a document with errors (no
// controller): a partial or empty queue would misadvise, and make the
// Runner forget the jobs it lowered.
func ParseJobs(r io.Reader) ([]Job, error) { return parseJobs(r, "squeue --json") }

// parseJobs is ParseJobs of a document from what (a command or request),
// which its errors name.
func parseJobs(r io.Reader, what string) ([]Job, error) {
	var doc squeueJSON
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := doc.err(what); err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(doc.Jobs))
	for i := range doc.Jobs {
		d := &doc.Jobs[i]
		ferr := func(field string, raw any, err error) error {
			return fmt.Errorf("%s: job %d: field %s: %v: %w", what, i+1, field, raw, err)
		}
		j := Job{User: d.User, Account: d.Account, Partition: d.Partition, QOS: d.QOS, Name: d.Name,
			Reason: d.Reason, AdminComment: d.AdminComment, Nodes: d.Nodes}
		id, ok, err := Number(d.JobID)
		if err != nil || !ok || id < 1 || id > 1<<53 {
			return nil, ferr("job_id", string(d.JobID), errNotNumber)
		}
		j.ID = strconv.FormatInt(int64(id), 10)
		states, err := States(d.State)
		if err != nil || len(states) == 0 {
			return nil, ferr("job_state", string(d.State), errNotNumber)
		}
		j.State = states[0]
		for _, t := range []struct {
			field string
			raw   json.RawMessage
			to    *time.Time
		}{{"submit_time", d.Submit, &j.Submit}, {"start_time", d.Start, &j.Start}, {"end_time", d.End, &j.End}} {
			v, ok, err := Number(t.raw)
			if err != nil || v < 0 || v > 1<<40 {
				return nil, ferr(t.field, string(t.raw), errNotNumber)
			}
			if ok && v > 0 {
				*t.to = time.Unix(int64(v), 0).UTC()
			}
		}
		// 22.05 writes an unlimited job's limit as 4294967295 (NO_VAL) or
		// leaves it out; later versions say infinite.
		if v, ok, err := Number(d.TimeLimit); err != nil || v < 0 {
			return nil, ferr("time_limit", string(d.TimeLimit), errNotNumber)
		} else if ok && v > 0 && v < 1<<32-2 {
			j.TimeLimit = time.Duration(v) * time.Minute
		}
		// 22.05 writes nice 0 as null (NICE_OFFSET itself), and a negative
		// one as the uint32 it wraps to.
		if v, ok, err := Number(d.Nice); err != nil || v < -1<<31 || v >= 1<<32 || v != math.Trunc(v) {
			return nil, ferr("nice", string(d.Nice), errNotNumber)
		} else if ok {
			if v >= 1<<31 {
				v -= 1 << 32
			}
			j.Nice = int(v)
		}
		if v, ok, err := Number(d.Priority); err != nil || v < 0 || v > 1<<53 {
			return nil, ferr("priority", string(d.Priority), errNotNumber)
		} else if ok {
			j.Priority = int64(v)
		}
		tres := d.TRESAlloc
		if tres == "" {
			tres = d.TRESReq
		}
		t, err := ParseTRES(tres)
		if err != nil {
			return nil, ferr("tres_req_str", tres, err)
		}
		j.GPUs, j.CPUs, j.MemoryBytes = t.GPUs, t.CPUs, t.MemoryBytes
		j.ArrayTasks = d.ArrayTasks
		if j.Tasks, err = countTasks(d.ArrayTasks); err != nil {
			return nil, ferr("array_task_string", d.ArrayTasks, err)
		}
		if v, ok, err := Number(d.ArrayMax); err != nil || v < 0 || v > maxTasks {
			return nil, ferr("array_max_tasks", string(d.ArrayMax), errNotNumber)
		} else if ok {
			j.MaxTasks = int(v)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// maxTasks bounds the tasks one array record stands for (Slurm's own
// MaxArraySize is at most 4,000,001).
const maxTasks = 4_000_001

// countTasks counts the tasks of an array_task_string: "1-20",
// "1,3,5-9:2", with an optional "%N" (at most N at once); "" is none.
func countTasks(s string) (int, error) {
	s, _, _ = strings.Cut(s, "%")
	if s == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		span, stepText, stepped := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(span, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		step := 1
		if err == nil && stepped {
			step, err = strconv.Atoi(stepText)
		}
		if err != nil || a < 0 || b < a || step < 1 {
			return 0, fmt.Errorf("%q is not a task range", part)
		}
		if n += (b-a)/step + 1; n > maxTasks {
			return 0, fmt.Errorf("more than %d tasks", maxTasks)
		}
	}
	return n, nil
}

// sinfoJSON is the part of sinfo --json read.
type sinfoJSON struct {
	slurmErrors
	Nodes []struct {
		Name       string          `json:"name"`
		State      json.RawMessage `json:"state"`
		StateFlags []string        `json:"state_flags"` // 22.05; later in state
		CPUs       json.RawMessage `json:"cpus"`
		AllocCPUs  json.RawMessage `json:"alloc_cpus"`
		Gres       string          `json:"gres"`
		GresUsed   string          `json:"gres_used"`
		Partitions []string        `json:"partitions"`
		Reason     string          `json:"reason"`
	} `json:"nodes"`
}

// ParseNodes reads the flat node list of sinfo --json (22.05) or
// scontrol show nodes --json (23.02 on).
func ParseNodes(r io.Reader) ([]Node, error) { return parseNodes(r, "sinfo --json") }

// parseNodes is ParseNodes of a document from what.
func parseNodes(r io.Reader, what string) ([]Node, error) {
	var doc sinfoJSON
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := doc.err(what); err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, len(doc.Nodes))
	for i := range doc.Nodes {
		d := &doc.Nodes[i]
		ferr := func(field, raw string, err error) error {
			return fmt.Errorf("%s: node %d (%q): field %s: %q: %w", what, i+1, d.Name, field, raw, err)
		}
		if d.Name == "" {
			return nil, ferr("name", "", errNotNumber)
		}
		n := Node{Name: d.Name, Partitions: d.Partitions, Reason: d.Reason}
		states, err := States(d.State)
		if err != nil {
			return nil, ferr("state", string(d.State), err)
		}
		for _, f := range d.StateFlags {
			states = append(states, strings.ToUpper(f))
		}
		n.States = states
		for _, c := range []struct {
			field string
			raw   json.RawMessage
			to    *int64
		}{{"cpus", d.CPUs, &n.CPUs}, {"alloc_cpus", d.AllocCPUs, &n.CPUsUsed}} {
			v, ok, err := Number(c.raw)
			if err != nil || v < 0 || v > maxCount {
				return nil, ferr(c.field, string(c.raw), errNotNumber)
			}
			if ok {
				*c.to = int64(v)
			}
		}
		if n.GPUs, err = GresGPUs(d.Gres); err != nil {
			return nil, ferr("gres", d.Gres, err)
		}
		if n.GPUsUsed, err = GresGPUs(d.GresUsed); err != nil {
			return nil, ferr("gres_used", d.GresUsed, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// GresGPUs counts the GPUs of a node's GRES string: "gpu:4",
// "gpu:a100:4(S:0-1)", "gpu:2(IDX:0-1),shard:8"; typed and untyped
// entries add up.
func GresGPUs(s string) (int64, error) {
	var n int64
	for _, g := range strings.Split(s, ",") {
		g, _, _ = strings.Cut(g, "(")
		parts := strings.Split(g, ":")
		if parts[0] != "gpu" || len(parts) < 2 {
			continue
		}
		c, err := count(parts[len(parts)-1])
		if err != nil {
			if len(parts) == 2 { // "gpu:a100": a type, one GPU
				c = 1
			} else {
				return 0, err
			}
		}
		n = min(n+c, maxCount)
	}
	return n, nil
}
