package datasets

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Prescient's own job history is JSON Lines: one Record per line, snake_case
// keys, SI units in the names, times in RFC 3339 (UTC). Blank lines are
// allowed; unknown keys are errors.
const prescientDoc = "Prescient job history, JSON Lines: one job per line (see datasets.Record); unknown keys are errors"

func init() {
	registerTrace(TraceFormat{Name: "prescient", Doc: prescientDoc, Read: readPrescient})
}

// Record is one job of Prescient's JSONL history: every field of
// cluster.Job, its JobSpec, Outcome and last Checkpoint. Times are written
// in RFC 3339 (UTC, nanoseconds when there are any), durations in seconds
// (float; exact to the nanosecond up to 2^23 s, about 97 days), bytes
// in bytes; zero values are left out, except gpus, submit_time and state.
//
// On reading, an empty tier is cluster.DefaultTier and a gpu_milli of zero
// (or none) on a job with GPUs means whole GPUs. Times may also be written
// "YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS" (UTC).
type Record struct {
	ID                 string            `json:"id"`
	Tenant             string            `json:"tenant,omitempty"`
	User               string            `json:"user,omitempty"`
	Name               string            `json:"name,omitempty"`
	Tier               string            `json:"tier,omitempty"`
	GPUs               int               `json:"gpus"`
	GPUMilli           int               `json:"gpu_milli,omitempty"`
	GPUModels          []string          `json:"gpu_models,omitempty"`
	CPUMilli           int64             `json:"cpu_milli,omitempty"`
	MemoryBytes        int64             `json:"memory_bytes,omitempty"`
	Deadline           string            `json:"deadline,omitempty"`
	GangSize           int               `json:"gang_size,omitempty"`
	Checkpointable     bool              `json:"checkpointable,omitempty"`
	CheckpointCostS    float64           `json:"checkpoint_cost_s,omitempty"`
	TimeLimitS         float64           `json:"time_limit_s,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	Data               *DataRecord       `json:"data,omitempty"`
	SubmitTime         string            `json:"submit_time"`
	State              string            `json:"state"`
	Attempts           int               `json:"attempts,omitempty"`
	LastCheckpoint     *CheckpointRecord `json:"last_checkpoint,omitempty"`
	StartTime          string            `json:"start_time,omitempty"`
	EndTime            string            `json:"end_time,omitempty"`
	RunTimeS           float64           `json:"run_time_s,omitempty"`
	PeakGPUMemoryBytes int64             `json:"peak_gpu_memory_bytes,omitempty"`
	EnergyJ            float64           `json:"energy_j,omitempty"`
	ExitCode           int               `json:"exit_code,omitempty"`
}

// DataRecord is the dataset a job reads (cluster.DataSource): its name,
// size in bytes, and the nodes and racks holding a warm copy.
type DataRecord struct {
	Name  string   `json:"name"`
	Bytes int64    `json:"bytes,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	Racks []string `json:"racks,omitempty"`
}

// CheckpointRecord is a Record's last checkpoint.
type CheckpointRecord struct {
	Time string `json:"time"`
	Step int64  `json:"step,omitempty"`
	Path string `json:"path,omitempty"`
}

// RecordFromJob converts a job to its JSONL record.
func RecordFromJob(j cluster.Job) Record {
	s := j.Spec
	r := Record{
		ID: string(j.ID), Tenant: s.Tenant, User: s.User, Name: s.Name, Tier: s.Tier.String(),
		GPUs: s.GPUs, GPUMilli: s.GPUMilli, GPUModels: s.GPUModels, CPUMilli: s.CPUMilli, MemoryBytes: s.MemoryBytes,
		Deadline: formatTime(s.Deadline), GangSize: s.GangSize, Checkpointable: s.Checkpointable,
		CheckpointCostS: s.CheckpointCost.Seconds(), TimeLimitS: s.TimeLimit.Seconds(), Labels: s.Labels,
		SubmitTime: formatTime(j.SubmitTime), State: string(j.State), Attempts: j.Attempts,
		StartTime: formatTime(j.StartTime), EndTime: formatTime(j.EndTime), RunTimeS: j.Outcome.RunTime.Seconds(),
		PeakGPUMemoryBytes: j.Outcome.PeakGPUMemoryBytes, EnergyJ: j.Outcome.EnergyJ, ExitCode: j.Outcome.ExitCode,
	}
	if cp := j.LastCheckpoint; cp != nil {
		r.LastCheckpoint = &CheckpointRecord{Time: formatTime(cp.Time), Step: cp.Step, Path: cp.Path}
	}
	if d := s.Data; d != nil {
		r.Data = &DataRecord{Name: d.Name, Bytes: d.Bytes, Nodes: d.Nodes, Racks: d.Racks}
	}
	return r
}

// formatTime writes a time in RFC 3339 UTC; the zero time is empty.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// fieldError is a bad value in a named field of a Record.
type fieldError struct {
	field, value string
	err          error
}

func (e *fieldError) Error() string { return fmt.Sprintf("%s: %q: %v", e.field, e.value, e.err) }
func (e *fieldError) Unwrap() error { return e.err }

// Job converts the record to a job and validates it (cluster.Job.Validate).
// The error names the field.
func (r Record) Job() (cluster.Job, error) {
	if r.ID == "" {
		return cluster.Job{}, &fieldError{"id", "", errEmpty}
	}
	spec, err := r.spec()
	if err != nil {
		return cluster.Job{}, err
	}
	j := cluster.Job{ID: cluster.JobID(r.ID), Spec: spec, Attempts: r.Attempts}
	if err := r.life(&j); err != nil {
		return cluster.Job{}, err
	}
	if err := j.Validate(); err != nil {
		return cluster.Job{}, err
	}
	return j, nil
}

// spec reads the job's request.
func (r Record) spec() (cluster.JobSpec, error) {
	s := cluster.JobSpec{
		Name: r.Name, Tenant: r.Tenant, User: r.User, GPUs: r.GPUs, GPUMilli: r.GPUMilli,
		CPUMilli: r.CPUMilli, MemoryBytes: r.MemoryBytes, GangSize: r.GangSize, Checkpointable: r.Checkpointable,
	}
	if len(r.GPUModels) > 0 {
		s.GPUModels = r.GPUModels
	}
	if len(r.Labels) > 0 {
		s.Labels = r.Labels
	}
	if d := r.Data; d != nil {
		s.Data = &cluster.DataSource{Name: d.Name, Bytes: d.Bytes, Nodes: d.Nodes, Racks: d.Racks}
		// JobSpec.Validate has the same rules; here the error names its
		// field for the reader's ParseError.
		if d.Name == "" {
			return s, &fieldError{"data.name", "", errEmpty}
		}
		if d.Bytes < 0 {
			return s, &fieldError{"data.bytes", fmt.Sprint(d.Bytes), errors.New("negative")}
		}
		for _, f := range []struct {
			field string
			names []string
		}{{"data.nodes", d.Nodes}, {"data.racks", d.Racks}} {
			for i, n := range f.names {
				if n == "" {
					return s, &fieldError{fmt.Sprintf("%s[%d]", f.field, i), "", errEmpty}
				}
			}
		}
	}
	var err error
	if s.Tier, err = parseTier(r.Tier); err != nil {
		return s, &fieldError{"tier", r.Tier, err}
	}
	if r.GPUs > MaxJobGPUs {
		return s, &fieldError{"gpus", fmt.Sprint(r.GPUs), fmt.Errorf("%w (over %d)", errTooLarge, MaxJobGPUs)}
	}
	if s.GPUs > 0 && s.GPUMilli == 0 {
		s.GPUMilli = cluster.MilliGPU
	}
	if s.CheckpointCost, err = secondsToDuration(r.CheckpointCostS); err != nil {
		return s, &fieldError{"checkpoint_cost_s", fmt.Sprint(r.CheckpointCostS), err}
	}
	if s.TimeLimit, err = secondsToDuration(r.TimeLimitS); err != nil {
		return s, &fieldError{"time_limit_s", fmt.Sprint(r.TimeLimitS), err}
	}
	if s.Deadline, err = optionalTime("deadline", r.Deadline); err != nil {
		return s, err
	}
	return s, nil
}

func parseTier(s string) (cluster.Tier, error) {
	if s == "" {
		return cluster.DefaultTier, nil
	}
	return cluster.ParseTier(s)
}

// life reads the job's state, times and outcome.
func (r Record) life(j *cluster.Job) error {
	var err error
	if j.State, err = cluster.ParseJobState(r.State); err != nil {
		return &fieldError{"state", r.State, err}
	}
	if r.SubmitTime == "" {
		return &fieldError{"submit_time", "", errEmpty}
	}
	if j.SubmitTime, err = optionalTime("submit_time", r.SubmitTime); err != nil {
		return err
	}
	if j.StartTime, err = optionalTime("start_time", r.StartTime); err != nil {
		return err
	}
	if j.EndTime, err = optionalTime("end_time", r.EndTime); err != nil {
		return err
	}
	if r.Attempts < 0 {
		return &fieldError{"attempts", fmt.Sprint(r.Attempts), errNegative}
	}
	if j.Outcome, err = r.outcome(); err != nil {
		return err
	}
	return r.checkpoint(j)
}

func (r Record) outcome() (cluster.Outcome, error) {
	o := cluster.Outcome{PeakGPUMemoryBytes: r.PeakGPUMemoryBytes, EnergyJ: r.EnergyJ, ExitCode: r.ExitCode}
	var err error
	if o.RunTime, err = secondsToDuration(r.RunTimeS); err != nil {
		return o, &fieldError{"run_time_s", fmt.Sprint(r.RunTimeS), err}
	}
	if o.PeakGPUMemoryBytes < 0 {
		return o, &fieldError{"peak_gpu_memory_bytes", fmt.Sprint(o.PeakGPUMemoryBytes), errNegative}
	}
	if o.EnergyJ < 0 {
		return o, &fieldError{"energy_j", fmt.Sprint(o.EnergyJ), errNegative}
	}
	return o, nil
}

func (r Record) checkpoint(j *cluster.Job) error {
	cp := r.LastCheckpoint
	if cp == nil {
		return nil
	}
	if cp.Time == "" {
		return &fieldError{"last_checkpoint.time", "", errEmpty}
	}
	t, err := optionalTime("last_checkpoint.time", cp.Time)
	if err != nil {
		return err
	}
	j.LastCheckpoint = &cluster.Checkpoint{Time: t, Step: cp.Step, Path: cp.Path}
	return nil
}

// optionalTime parses a time field; empty is the zero time.
func optionalTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return t, &fieldError{field, s, errors.New("not a time (want RFC 3339)")}
	}
	return t, nil
}

// WriteJSONL writes jobs as Prescient JSONL, one Record per line, in the
// order given. It refuses a job that does not validate, so that what it
// writes reads back.
func WriteJSONL(w io.Writer, jobs []cluster.Job) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range jobs {
		if err := jobs[i].Validate(); err != nil {
			return fmt.Errorf("job %d (%s): %w", i, jobs[i].ID, err)
		}
		if err := enc.Encode(RecordFromJob(jobs[i])); err != nil {
			return fmt.Errorf("job %d (%s): %w", i, jobs[i].ID, err)
		}
	}
	return bw.Flush()
}

// maxJSONLine bounds one JSONL record.
const maxJSONLine = 4 << 20

// readPrescient reads Prescient JSONL.
func readPrescient(r io.Reader, file string, opt ReadOptions) (Result, error) {
	if err := opt.Validate(); err != nil {
		return Result{}, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxJSONLine)
	sink := newJobSink(opt, true)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		job, err := decodeRecord(sc.Bytes(), file, line, opt)
		if err == nil {
			err = sink.add(job, file, line)
		}
		if err := sink.handle(err); err != nil {
			return Result{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, fmt.Errorf("read %s: line %d: %w", file, line+1, err)
	}
	return sink.result(), nil
}

// decodeRecord parses one line into a job; errors are *ParseError.
func decodeRecord(data []byte, file string, line int, opt ReadOptions) (cluster.Job, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rec Record
	if err := dec.Decode(&rec); err != nil {
		return cluster.Job{}, &ParseError{File: file, Line: line, Err: fmt.Errorf("not a JSON record: %w", err)}
	}
	if opt.Specs {
		if rec.State == "" {
			rec.State = string(cluster.StateQueued)
		}
		if rec.SubmitTime == "" {
			rec.SubmitTime = cmp.Or(opt.Now, time.Now()).UTC().Format(time.RFC3339Nano)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return cluster.Job{}, &ParseError{File: file, Line: line, Err: errors.New("more than one JSON value on the line")}
	}
	job, err := rec.Job()
	var fe *fieldError
	if errors.As(err, &fe) {
		return cluster.Job{}, &ParseError{File: file, Line: line, Field: fe.field, Value: fe.value, Err: fe.err}
	}
	if err != nil {
		return cluster.Job{}, &ParseError{File: file, Line: line, Err: err}
	}
	return job, nil
}
