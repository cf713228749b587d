package datasets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/slurm"
)

// A Slurm site's own accounting, as sacct exports it, in either of two
// forms (told apart by the first character):
//
//   - sacct --parsable2 (fields separated by '|', a header line first)
//     with at least the fields SlurmFields; run it as
//     `TZ=UTC sacct --parsable2 --allusers --format=...`: its times carry no
//     zone, and the reader takes them as UTC.
//   - sacct --json, as data parser v0.0.36 to v0.0.38 (Slurm 21.08-23.02)
//     and v0.0.39 and later (23.02 on) write it: times in Unix seconds,
//     limits in minutes, either plain numbers or {"set", "infinite",
//     "number"} objects.
//
// Only jobs are read; their steps (JobID with a '.') are skipped. Account
// is the tenant (the user where empty); partition and QOS are labels; the
// time limit is the job's; GPUs are the gres/gpu of AllocTRES (ReqTRES
// for a job that got nothing), CPUs and memory likewise.
const slurmDoc = "Slurm accounting, sacct --parsable2 (run with TZ=UTC) or sacct --json: account = tenant, " +
	"partition and QOS labels, Timelimit = time limit, GPUs from AllocTRES gres/gpu"

// SlurmFields are the sacct fields the --parsable2 reader needs.
var SlurmFields = []string{"JobID", "User", "Account", "Partition", "QOS", "JobName", "Submit", "Start", "End",
	"Elapsed", "Timelimit", "AllocTRES", "ReqTRES", "State", "ExitCode"}

// LabelSlurmState keeps the Slurm state of a job that did not simply
// complete (TIMEOUT: killed at its limit; OUT_OF_MEMORY; PREEMPTED; ...).
const LabelSlurmState = "slurm.state"

func init() {
	registerTrace(TraceFormat{Name: "slurm", Doc: slurmDoc, Read: readSlurm})
}

// ReadSlurm reads sacct output from r (either form); name is what errors
// call it. The live Slurm advisor reads its accounting through it.
func ReadSlurm(r io.Reader, name string, opt ReadOptions) (Result, error) {
	return readSlurm(r, name, opt)
}

func readSlurm(r io.Reader, file string, opt ReadOptions) (Result, error) {
	if err := opt.Validate(); err != nil {
		return Result{}, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := br.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Result{}, &ParseError{File: file, Line: 1, Err: errors.New("empty file: no sacct header or JSON")}
			}
			return Result{}, fmt.Errorf("%s: %w", file, err)
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n', 0xEF: // a byte-order mark's first byte is checked below
			if b[0] == 0xEF {
				if bom, _ := br.Peek(3); string(bom) == "\ufeff" {
					br.Discard(3)
					continue
				}
				return readSacctText(br, file, opt)
			}
			br.Discard(1)
			continue
		case '{':
			return readSacctJSON(br, file, opt)
		}
		return readSacctText(br, file, opt)
	}
}

// readSacctText reads sacct --parsable2.
func readSacctText(br *bufio.Reader, file string, opt ReadOptions) (Result, error) {
	sink := newJobSink(opt, true)
	var col map[string]int
	var header []string
	p := slurmParser{file: file, strs: map[string]string{}}
	for line := 1; ; line++ {
		text, err := readBoundedLine(br)
		if errors.Is(err, io.EOF) && len(text) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if !errors.Is(err, bufio.ErrBufferFull) || col == nil {
				return Result{}, fmt.Errorf("%s:%d: %w", file, line, err)
			}
			if err := sink.handle(&ParseError{File: file, Line: line, Err: fmt.Errorf("line longer than %d bytes", maxLineBytes)}); err != nil {
				return Result{}, err
			}
			continue
		}
		s := strings.TrimRight(string(text), "\r\n")
		if strings.TrimSpace(s) == "" {
			continue
		}
		if col == nil {
			header = strings.Split(s, "|")
			col = make(map[string]int, len(header))
			for i, h := range header {
				h = strings.TrimSpace(h)
				if _, dup := col[h]; dup {
					return Result{}, &ParseError{File: file, Line: line, Err: fmt.Errorf("header: field %q appears twice", h)}
				}
				col[h] = i
			}
			for _, w := range SlurmFields {
				if _, ok := col[w]; !ok {
					return Result{}, &ParseError{File: file, Line: line, Err: fmt.Errorf("header: field %q is missing (run sacct --parsable2 --format=%s)", w, strings.Join(SlurmFields, ","))}
				}
			}
			continue
		}
		rec := strings.Split(s, "|")
		if len(rec) != len(header) {
			err := &ParseError{File: file, Line: line, Err: fmt.Errorf("%d fields, the header has %d (a '|' in a job name?)", len(rec), len(header))}
			if err := sink.handle(err); err != nil {
				return Result{}, err
			}
			continue
		}
		get := func(name string) string { return strings.TrimSpace(rec[col[name]]) }
		id := get("JobID")
		if strings.Contains(id, ".") {
			continue // a step: its job's line has what is needed
		}
		job, err := p.textJob(get, line)
		if err == nil {
			err = sink.add(job, file, line)
		}
		if err := sink.handle(err); err != nil {
			return Result{}, err
		}
	}
	if col == nil {
		return Result{}, &ParseError{File: file, Line: 1, Err: errors.New("empty file: no sacct header")}
	}
	return sink.result(), nil
}

// slurmParser turns sacct's records into jobs.
type slurmParser struct {
	file string
	strs map[string]string
}

func (p *slurmParser) intern(s string) string {
	if v, ok := p.strs[s]; ok {
		return v
	}
	p.strs[s] = s
	return s
}

func (p *slurmParser) textJob(get func(string) string, line int) (cluster.Job, error) {
	ferr := func(field string, err error) error {
		return &ParseError{File: p.file, Line: line, Field: field, Value: get(field), Err: err}
	}
	id := get("JobID")
	if id == "" {
		return cluster.Job{}, ferr("JobID", errEmpty)
	}
	submit, err := slurmTime(get("Submit"))
	if err != nil || submit.IsZero() {
		if err == nil {
			err = errors.New("a job needs a submit time")
		}
		return cluster.Job{}, ferr("Submit", err)
	}
	start, err := slurmTime(get("Start"))
	if err != nil {
		return cluster.Job{}, ferr("Start", err)
	}
	end, err := slurmTime(get("End"))
	if err != nil {
		return cluster.Job{}, ferr("End", err)
	}
	elapsed, err := slurmDuration(get("Elapsed"))
	if err != nil {
		return cluster.Job{}, ferr("Elapsed", err)
	}
	limit, err := slurmLimit(get("Timelimit"))
	if err != nil {
		return cluster.Job{}, ferr("Timelimit", err)
	}
	alloc, err := parseTRES(get("AllocTRES"))
	if err != nil {
		return cluster.Job{}, ferr("AllocTRES", err)
	}
	req, err := parseTRES(get("ReqTRES"))
	if err != nil {
		return cluster.Job{}, ferr("ReqTRES", err)
	}
	exit, err := slurmExitCode(get("ExitCode"))
	if err != nil {
		return cluster.Job{}, ferr("ExitCode", err)
	}
	state, label, err := slurmState(get("State"))
	if err != nil {
		return cluster.Job{}, ferr("State", err)
	}
	return p.job(slurmRecord{id: id, user: get("User"), account: get("Account"), partition: get("Partition"), qos: get("QOS"),
		name: get("JobName"), submit: submit, start: start, end: end, elapsed: elapsed, limit: limit,
		alloc: alloc, req: req, state: state, stateLabel: label, exit: exit})
}

// slurmRecord is a job as either form gives it.
type slurmRecord struct {
	id, user, account, partition, qos, name string
	submit, start, end                      time.Time
	elapsed, limit                          time.Duration
	alloc, req                              tres
	state                                   cluster.JobState
	stateLabel                              string
	exit                                    int
}

func (p *slurmParser) job(r slurmRecord) (cluster.Job, error) {
	res := r.alloc
	if res.GPUs == 0 && res.CPUs == 0 {
		res = r.req
	}
	if res.GPUs > MaxJobGPUs {
		return cluster.Job{}, fmt.Errorf("%w: %d GPUs (over %d)", errTooLarge, res.GPUs, MaxJobGPUs)
	}
	spec := slurm.Spec(p.intern(r.user), p.intern(r.account), p.intern(r.name), p.intern(r.partition),
		p.intern(r.qos), res, r.limit)
	if r.stateLabel != "" {
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels[LabelSlurmState] = p.intern(r.stateLabel)
	}
	j := cluster.NewJob(cluster.JobID(r.id), spec, r.submit)
	j.State = r.state
	j.Outcome.ExitCode = r.exit
	if !r.start.IsZero() && r.state != cluster.StateQueued {
		j.StartTime, j.Attempts = r.start.UTC(), 1
		j.Outcome.RunTime = r.elapsed
	}
	if r.state.Terminal() && !r.end.IsZero() {
		j.EndTime = r.end.UTC()
	}
	if r.state == cluster.StateRunning {
		j.Outcome.RunTime = 0 // still running: its elapsed time is not a run time
	}
	return j, nil
}

// slurmTime reads a sacct time: "YYYY-MM-DDTHH:MM:SS" taken as UTC;
// "Unknown", "None" and empty are the zero time.
func slurmTime(s string) (time.Time, error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, nil
	}
	t, err := time.Parse("2006-01-02T15:04:05", s)
	if err != nil {
		return time.Time{}, errors.New("not a sacct time (YYYY-MM-DDTHH:MM:SS)")
	}
	if t.Year() < 1970 { // Slurm's clock starts at Unix time 0
		return time.Time{}, errors.New("before 1970: not a sacct time")
	}
	return t.UTC(), nil
}

// slurmDuration reads a Slurm time (slurm.ParseDuration).
func slurmDuration(s string) (time.Duration, error) { return slurm.ParseDuration(s) }

// slurmLimit reads a Timelimit: a duration, or none (UNLIMITED,
// Partition_Limit, INVALID: the partition's limit applies, unknown here).
func slurmLimit(s string) (time.Duration, error) {
	switch s {
	case "", "UNLIMITED", "Partition_Limit", "INVALID":
		return 0, nil
	}
	return slurmDuration(s)
}

// slurmExitCode reads "code:signal" (a signal counts as 128+signal, as a
// shell reports it).
func slurmExitCode(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	c, sig, _ := strings.Cut(s, ":")
	code, err := strconv.Atoi(c)
	if err != nil || code < 0 || code > 255 {
		return 0, errors.New("not code:signal")
	}
	if sig != "" {
		n, err := strconv.Atoi(sig)
		if err != nil || n < 0 || n > 127 {
			return 0, errors.New("not code:signal")
		}
		if n > 0 {
			return 128 + n, nil
		}
	}
	return code, nil
}

// slurmState maps a Slurm job state to a job state, with the state as a
// label where the mapping loses something.
func slurmState(s string) (cluster.JobState, string, error) {
	base, _, _ := strings.Cut(strings.TrimSpace(s), " ") // "CANCELLED by 1234"
	base = strings.TrimSuffix(base, "+")
	switch base {
	case "COMPLETED":
		return cluster.StateSucceeded, "", nil
	case "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		return cluster.StateQueued, labelUnless(base, "PENDING"), nil
	case "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED":
		return cluster.StateRunning, labelUnless(base, "RUNNING"), nil
	case "CANCELLED", "PREEMPTED", "REVOKED":
		return cluster.StateCancelled, labelUnless(base, "CANCELLED"), nil
	case "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT":
		return cluster.StateFailed, labelUnless(base, "FAILED"), nil
	}
	return "", "", errors.New("not a Slurm job state")
}

func labelUnless(state, plain string) string {
	if state == plain {
		return ""
	}
	return state
}

// tres is what a TRES list gives: GPUs, CPUs and memory.
type tres = slurm.TRES

// parseTRES reads a TRES list as Slurm writes it (slurm.ParseTRES), a job's
// GPUs bounded as the other readers bound them.
func parseTRES(s string) (tres, error) {
	t, err := slurm.ParseTRES(s)
	if err != nil {
		return tres{}, err
	}
	if t.GPUs > MaxJobGPUs {
		return tres{}, fmt.Errorf("gres/gpu: %w (over %d)", errTooLarge, MaxJobGPUs)
	}
	return t, nil
}

// sacctJSON is the part of sacct --json the reader uses. Fields that
// changed shape between data parser versions are raw.
type sacctJSON struct {
	Jobs []struct {
		JobID     json.RawMessage `json:"job_id"`
		User      string          `json:"user"`
		Account   string          `json:"account"`
		Partition string          `json:"partition"`
		QOS       string          `json:"qos"`
		Name      string          `json:"name"`
		Time      struct {
			Submission json.RawMessage `json:"submission"`
			Start      json.RawMessage `json:"start"`
			End        json.RawMessage `json:"end"`
			Elapsed    json.RawMessage `json:"elapsed"`
			Limit      json.RawMessage `json:"limit"`
		} `json:"time"`
		TRES struct {
			Allocated []sacctTRES `json:"allocated"`
			Requested []sacctTRES `json:"requested"`
		} `json:"tres"`
		State    json.RawMessage `json:"state"`
		ExitCode json.RawMessage `json:"exit_code"`
	} `json:"jobs"`
}

type sacctTRES struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Count json.RawMessage `json:"count"`
}

// readSacctJSON reads sacct --json. The document is one object: a syntax
// error fails the read; a job the reader cannot make sense of is a row
// error (line = the job's 1-based index in "jobs", the field its key).
func readSacctJSON(r io.Reader, file string, opt ReadOptions) (Result, error) {
	var doc sacctJSON
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return Result{}, &ParseError{File: file, Line: 1, Err: fmt.Errorf("sacct --json: %w", err)}
	}
	sink := newJobSink(opt, true)
	p := slurmParser{file: file, strs: map[string]string{}}
	for i := range doc.Jobs {
		rec, err := p.jsonRecord(&doc, i)
		var job cluster.Job
		if err == nil {
			job, err = p.job(rec)
			if err != nil {
				err = &ParseError{File: file, Line: i + 1, Field: "tres", Err: err}
			}
		}
		if err == nil {
			err = sink.add(job, file, i+1)
		}
		if err := sink.handle(err); err != nil {
			return Result{}, err
		}
	}
	return sink.result(), nil
}

// jsonRecord reads job i of doc.
func (p *slurmParser) jsonRecord(doc *sacctJSON, i int) (slurmRecord, error) {
	j := &doc.Jobs[i]
	ferr := func(field string, raw json.RawMessage, err error) error {
		return &ParseError{File: p.file, Line: i + 1, Field: field, Value: string(raw), Err: err}
	}
	id, ok, err := jsonNumber(j.JobID)
	if err != nil || !ok || id < 0 {
		return slurmRecord{}, ferr("job_id", j.JobID, errors.New("want a job number"))
	}
	rec := slurmRecord{id: strconv.FormatInt(int64(id), 10), user: j.User, account: j.Account, partition: j.Partition, qos: j.QOS, name: j.Name}
	times := []struct {
		name string
		raw  json.RawMessage
		dst  *time.Time
	}{{"time.submission", j.Time.Submission, &rec.submit}, {"time.start", j.Time.Start, &rec.start}, {"time.end", j.Time.End, &rec.end}}
	for _, t := range times {
		v, ok, err := jsonNumber(t.raw)
		if err != nil || v < 0 || v > 1<<40 {
			return slurmRecord{}, ferr(t.name, t.raw, errors.New("want Unix seconds"))
		}
		if ok && v > 0 {
			*t.dst = time.Unix(int64(v), 0).UTC()
		}
	}
	if rec.submit.IsZero() {
		return slurmRecord{}, ferr("time.submission", j.Time.Submission, errors.New("a job needs a submit time"))
	}
	if v, ok, err := jsonNumber(j.Time.Elapsed); err != nil || v < 0 || v > maxSeconds {
		return slurmRecord{}, ferr("time.elapsed", j.Time.Elapsed, errors.New("want seconds"))
	} else if ok {
		rec.elapsed = time.Duration(v) * time.Second
	}
	if v, ok, err := jsonNumber(j.Time.Limit); err != nil || v < 0 || v > maxSeconds/60 {
		return slurmRecord{}, ferr("time.limit", j.Time.Limit, errors.New("want minutes"))
	} else if ok {
		rec.limit = time.Duration(v) * time.Minute
	}
	if rec.alloc, err = jsonTRES(j.TRES.Allocated); err != nil {
		return slurmRecord{}, ferr("tres.allocated", nil, err)
	}
	if rec.req, err = jsonTRES(j.TRES.Requested); err != nil {
		return slurmRecord{}, ferr("tres.requested", nil, err)
	}
	state, err := jsonState(j.State)
	if err != nil {
		return slurmRecord{}, ferr("state", j.State, err)
	}
	if rec.state, rec.stateLabel, err = slurmState(state); err != nil {
		return slurmRecord{}, ferr("state", j.State, err)
	}
	if rec.exit, err = jsonExitCode(j.ExitCode); err != nil {
		return slurmRecord{}, ferr("exit_code", j.ExitCode, err)
	}
	return rec, nil
}

// jsonNumber is slurm.Number.
var jsonNumber = slurm.Number

func jsonTRES(list []sacctTRES) (tres, error) {
	var t tres
	var gpus slurm.GPUTally
	for _, x := range list {
		v, ok, err := jsonNumber(x.Count)
		if err != nil || v < 0 || v > float64(maxMiB)*(1<<20) {
			return tres{}, fmt.Errorf("%s/%s: count %s is not a non-negative number", x.Type, x.Name, x.Count)
		}
		if !ok {
			continue
		}
		n := int64(v)
		switch {
		case x.Type == "cpu":
			t.CPUs = min(n, maxMilliCPU/1000)
		case x.Type == "mem":
			t.MemoryBytes = min(n, maxMiB) << 20 // MiB
		case x.Type == "gres" && slurm.IsGPU(x.Name):
			gpus.Add(x.Name, n)
		}
	}
	t.GPUs = gpus.Total()
	if t.GPUs > MaxJobGPUs {
		return tres{}, fmt.Errorf("%w: %d GPUs (over %d)", errTooLarge, t.GPUs, MaxJobGPUs)
	}
	return t, nil
}

// jsonState reads "state": {"current": "COMPLETED"} (v0.0.38 and
// before), {"current": ["COMPLETED"]} (v0.0.39 on) or a plain string.
func jsonState(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		Current json.RawMessage `json:"current"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", errors.New("want a state")
	}
	if json.Unmarshal(o.Current, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(o.Current, &list) == nil && len(list) > 0 {
		return list[0], nil
	}
	return "", errors.New("want a state")
}

// jsonExitCode reads "exit_code": {"return_code": n, "signal":
// {"signal_id": n}} in either number form; absent is 0.
func jsonExitCode(raw json.RawMessage) (int, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var o struct {
		ReturnCode json.RawMessage `json:"return_code"`
		Signal     struct {
			ID json.RawMessage `json:"id"`
			// v0.0.38 and before
			SignalID json.RawMessage `json:"signal_id"`
		} `json:"signal"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return 0, errors.New("want an exit code object")
	}
	for _, sig := range []json.RawMessage{o.Signal.ID, o.Signal.SignalID} {
		if v, ok, err := jsonNumber(sig); err == nil && ok && v > 0 && v < 128 {
			return 128 + int(v), nil
		}
	}
	v, ok, err := jsonNumber(o.ReturnCode)
	if err != nil || (ok && (v < 0 || v > 255)) {
		return 0, errors.New("return_code: want 0..255")
	}
	return int(v), nil
}
