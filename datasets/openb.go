package datasets

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// The Alibaba openb pod list (cluster-trace-gpu-v2023,
// openb_pod_list_*.csv): one row per pod.
//
//	name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
//	openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
//
// Times are seconds from the start of the trace, which publishes no
// absolute date: they count from ReadOptions.Epoch.
const openbDoc = "Alibaba openb pod list (openb_pod_list_*.csv); times are seconds from ReadOptions.Epoch " +
	"(default 2023-01-01, arbitrary); one tenant \"openb\"; fractional GPUs via gpu_milli"

// OpenbTenant is the tenant of every openb job: the trace names none.
const OpenbTenant = "openb"

// openbColumns are the columns every openb list has; several variants
// Alibaba publishes (the multigpu* lists, for one) carry only these.
var openbColumns = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}

// openbLife are the columns of a pod's life: a list has all or none.
var openbLife = []string{"pod_phase", "creation_time", "deletion_time", "scheduled_time"}

// openbMissing says what each optional column's absence leaves out.
var openbMissing = []struct{ col, what string }{
	{"gpu_spec", "gpu_spec: no pod is bound to a GPU model"},
	{"qos", "qos: no pod has its QoS class (label qos)"},
	{"pod_phase", "pod_phase, creation_time, deletion_time, scheduled_time: no times or outcomes; every pod is a pending request at the epoch, for placement experiments (simulate --experiment fill) only"},
}

func init() {
	registerTrace(TraceFormat{Name: "openb", Doc: openbDoc, Read: readOpenb})
}

// readOpenb reads an openb pod list. The pod name is the job's ID and name;
// qos goes to Labels["qos"]; gpu_spec ("A|B") to GPUModels. The pod phase
// maps to a job state:
//
//   - Succeeded, Failed: done; started at scheduled_time, ended at
//     deletion_time.
//   - Running: the pod was still running when the trace was taken, so its
//     deletion_time is the trace's cut-off (or the snapshot's view of it),
//     not an end. The job is running, started at scheduled_time, with
//     EndTime zero and RunTime = deletion_time - scheduled_time, the run
//     time observed so far (a lower bound).
//   - Pending: never scheduled (scheduled_time empty): queued, no start.
//
// A list with only the five request columns (some published variants) is
// read too: see openbMissing for what each absent column leaves out, and
// Result.Missing and Result.Untimed.
func readOpenb(r io.Reader, file string, opt ReadOptions) (Result, error) {
	p := &openbParser{epoch: opt.epoch()}
	res, err := readCSVJobs(r, file, opt, openbColumns, true, p.job)
	if err != nil {
		return res, err
	}
	if p.has == nil {
		return res, nil // no rows: nothing to say
	}
	for _, m := range openbMissing {
		if !p.has[m.col] {
			res.Missing = append(res.Missing, m.what)
		}
	}
	res.Untimed = !p.has["pod_phase"]
	return res, nil
}

type openbParser struct {
	epoch time.Time
	// has says which optional columns the header has, once the first row
	// is read.
	has map[string]bool
}

// columns notes the optional columns of the header and checks that the
// life columns come all or none.
func (p *openbParser) columns(t *csvTable) error {
	p.has = map[string]bool{"gpu_spec": t.has("gpu_spec"), "qos": t.has("qos")}
	var have, lack []string
	for _, c := range openbLife {
		if t.has(c) {
			have = append(have, c)
		} else {
			lack = append(lack, c)
		}
	}
	if len(have) > 0 && len(lack) > 0 {
		return &ParseError{File: t.file, Line: 1, Err: fmt.Errorf("header: has %s but not %s: a pod's life needs all four or none",
			strings.Join(have, ","), strings.Join(lack, ","))}
	}
	p.has["pod_phase"] = len(lack) == 0
	return nil
}

// openbPhases maps pod phases to job states.
var openbPhases = map[string]cluster.JobState{
	"Succeeded": cluster.StateSucceeded,
	"Failed":    cluster.StateFailed,
	"Running":   cluster.StateRunning,
	"Pending":   cluster.StateQueued,
}

func (p *openbParser) job(t *csvTable) (cluster.Job, error) {
	if p.has == nil {
		if err := p.columns(t); err != nil {
			return cluster.Job{}, err
		}
	}
	name := t.rec[t.col("name")]
	if name == "" {
		return cluster.Job{}, t.fieldError(t.col("name"), errEmpty)
	}
	spec, err := openbSpec(t)
	if err != nil {
		return cluster.Job{}, err
	}
	spec.Name = name
	job := cluster.Job{ID: cluster.JobID(name), Spec: spec}
	if !p.has["pod_phase"] {
		job.State, job.SubmitTime = cluster.StateQueued, p.epoch // a request, not a history
		return job, nil
	}
	if err := p.life(t, &job); err != nil {
		return cluster.Job{}, err
	}
	return job, nil
}

// openbSpec reads the resource request of a pod.
func openbSpec(t *csvTable) (cluster.JobSpec, error) {
	spec := cluster.JobSpec{Tenant: OpenbTenant, Tier: cluster.DefaultTier}
	vals, err := t.counts(countColumn{"cpu_milli", maxMilliCPU}, countColumn{"memory_mib", maxMiB},
		countColumn{"num_gpu", MaxJobGPUs}, countColumn{"gpu_milli", cluster.MilliGPU})
	if err != nil {
		return spec, err
	}
	spec.CPUMilli, spec.MemoryBytes, spec.GPUs, spec.GPUMilli = vals[0], vals[1]<<20, int(vals[2]), int(vals[3])
	if err := checkGPUShare(spec); err != nil {
		return spec, t.fieldError(t.col("gpu_milli"), err)
	}
	if t.has("gpu_spec") {
		for _, m := range strings.Split(t.rec[t.col("gpu_spec")], "|") {
			if m = strings.TrimSpace(m); m != "" {
				spec.GPUModels = append(spec.GPUModels, m)
			}
		}
	}
	if t.has("qos") {
		if q := t.rec[t.col("qos")]; q != "" {
			spec.Labels = map[string]string{cluster.LabelQoS: q}
		}
	}
	return spec, nil
}

// checkGPUShare checks gpu_milli against num_gpu: none without GPUs,
// 1..1000 with one, whole GPUs with more.
func checkGPUShare(s cluster.JobSpec) error {
	switch {
	case s.GPUs == 0 && s.GPUMilli != 0:
		return fmt.Errorf("%d milli-GPUs on a pod with no GPUs", s.GPUMilli)
	case s.GPUs > 0 && s.GPUMilli == 0:
		return fmt.Errorf("zero on a pod with %d GPUs", s.GPUs)
	case s.GPUs > 1 && s.GPUMilli != cluster.MilliGPU:
		return fmt.Errorf("a share of a GPU needs num_gpu 1, not %d", s.GPUs)
	}
	return nil
}

// life reads the pod's phase and times into the job's state and times.
func (p openbParser) life(t *csvTable, j *cluster.Job) error {
	colPhase := t.col("pod_phase")
	state, ok := openbPhases[t.rec[colPhase]]
	if !ok {
		return t.fieldError(colPhase, fmt.Errorf("%w (want Succeeded, Failed, Running or Pending)", errUnknownValue))
	}
	j.State = state
	created, err := p.offset(t, "creation_time", true)
	if err != nil {
		return err
	}
	j.SubmitTime = created
	if state == cluster.StateQueued {
		return p.pending(t)
	}
	return p.started(t, j)
}

// pending checks a Pending pod: it was never scheduled.
func (p openbParser) pending(t *csvTable) error {
	if col := t.col("scheduled_time"); t.rec[col] != "" {
		return t.fieldError(col, errors.New("set on a Pending pod"))
	}
	_, err := p.offset(t, "deletion_time", false)
	return err
}

// started fills the times of a pod that was scheduled.
func (p openbParser) started(t *csvTable, j *cluster.Job) error {
	start, err := p.offset(t, "scheduled_time", true)
	if err != nil {
		return err
	}
	if start.Before(j.SubmitTime) {
		return t.fieldError(t.col("scheduled_time"), errors.New("before creation_time"))
	}
	end, err := p.offset(t, "deletion_time", true)
	if err != nil {
		return err
	}
	if end.Before(start) {
		return t.fieldError(t.col("deletion_time"), errors.New("before scheduled_time"))
	}
	j.Attempts, j.StartTime, j.Outcome.RunTime = 1, start, end.Sub(start)
	if j.State.Terminal() {
		j.EndTime = end
	}
	return nil
}

// offset reads a time column written as seconds since the epoch; an empty
// value is an error when required and the zero time otherwise.
func (p openbParser) offset(t *csvTable, name string, required bool) (time.Time, error) {
	col := t.col(name)
	if t.rec[col] == "" {
		if required {
			return time.Time{}, t.fieldError(col, errEmpty)
		}
		return time.Time{}, nil
	}
	d, err := parseSeconds(t.rec[col])
	if err != nil {
		return time.Time{}, t.fieldError(col, err)
	}
	return p.epoch.Add(d), nil
}
