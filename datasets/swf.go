package datasets

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// The Standard Workload Format of the Parallel Workloads Archive
// (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): header
// lines start with ';' and hold "Key: value" pairs; every other non-blank
// line is one job of 18 whitespace-separated numbers, -1 where unknown:
//
//	1 job number        7 used memory (KB/proc)    13 group id
//	2 submit time (s)   8 requested processors     14 executable id
//	3 wait time (s)     9 requested time (s)       15 queue number
//	4 run time (s)     10 requested memory (KB)    16 partition number
//	5 allocated procs  11 status                   17 preceding job
//	6 avg CPU time (s) 12 user id                  18 think time (s)
//
// Submit times count from the header's UnixStartTime. Processors stand in
// for GPUs: a job of n processors asks for n whole "GPUs", and the swf
// fleet format builds the machine of the header's MaxNodes and MaxProcs.
const swfDoc = "Standard Workload Format (Parallel Workloads Archive, .swf): 18 fields a job, times from the header's " +
	"UnixStartTime; processors stand in for GPUs, requested time = time limit, group = tenant"

// swfFleetDoc documents the fleet format.
const swfFleetDoc = "swf:PATH, the machine an SWF log ran on: the header's MaxNodes nodes of MaxProcs/MaxNodes " +
	"processors each, processors standing in for GPUs"

// SWFProcessorModel is the "GPU model" of an swf fleet's processors.
const SWFProcessorModel = "processor"

// Labels the swf reader sets where the log knows the value. Partition and
// queue take the names the header gives their numbers, else the number.
const (
	LabelPartition = cluster.LabelPartition
	LabelQueue     = "queue"
	// LabelSWFPrefix starts the labels of the fields the job model has no
	// place for: swf.avg_cpu_time_s, swf.used_memory_kb,
	// swf.requested_processors, swf.requested_memory_kb, swf.status,
	// swf.preceding_job, swf.think_time_s.
	LabelSWFPrefix = "swf."
)

func init() {
	registerTrace(TraceFormat{Name: "swf", Doc: swfDoc, Read: readSWF})
	registerFleet(FleetFormat{Name: "swf", Doc: swfFleetDoc, Open: swfFleet})
}

// swfFields names the 18 fields, in order, as errors and labels call them.
var swfFields = [swfNumFields]string{
	"job_number", "submit_time", "wait_time", "run_time", "allocated_processors", "avg_cpu_time",
	"used_memory", "requested_processors", "requested_time", "requested_memory", "status", "user_id",
	"group_id", "executable_id", "queue", "partition", "preceding_job", "think_time",
}

const swfNumFields = 18

// Field indexes (0-based) of the fields the reader maps.
const (
	swfJob = iota
	swfSubmit
	swfWait
	swfRun
	swfAlloc
	swfAvgCPU
	swfUsedMem
	swfReqProcs
	swfReqTime
	swfReqMem
	swfStatus
	swfUser
	swfGroup
	swfExec
	swfQueue
	swfPartition
	swfPreceding
	swfThink
)

// SWF status codes (field 11).
const (
	swfFailed        = 0
	swfCompleted     = 1
	swfPartial       = 2 // a partial execution to be continued
	swfPartialDone   = 3 // the last partial execution; the job completed
	swfPartialFailed = 4 // the last partial execution; the job failed
	swfCancelled     = 5
)

// swfHeader is what the reader uses of the header.
type swfHeader struct {
	unixStart  int64 // UnixStartTime; valid when hasStart
	hasStart   bool
	maxNodes   int64
	maxProcs   int64
	partitions map[int64]string
	queues     map[int64]string
}

// maxLineBytes bounds a line of the line-based readers (swf, slurm); an
// SWF job line is under 200 bytes, a sacct one under 1,000.
const maxLineBytes = 64 << 10

// readSWF reads an SWF log. Job IDs are the job numbers. A job's state
// follows its status: 1 and 3 succeeded, 0 and 4 failed, 5 cancelled; 2 (a
// partial execution to be continued) is read as cancelled and -1 (unknown)
// as succeeded, both marked by the swf.status label. A job that waited and
// ran has StartTime and EndTime; one cancelled before it started (no
// processors allocated) has an EndTime only. Processors are the allocated
// ones, or the requested ones where none were allocated.
func readSWF(r io.Reader, file string, opt ReadOptions) (Result, error) {
	if err := opt.Validate(); err != nil {
		return Result{}, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	h := swfHeader{partitions: map[int64]string{}, queues: map[int64]string{}}
	p := swfParser{file: file, h: &h, strs: map[string]string{}, epoch: opt.epoch()}
	sink := newJobSink(opt, false)
	seen := map[int64]int{} // line of each job number, for whole jobs
	for line := 1; ; line++ {
		text, err := readBoundedLine(br)
		if errors.Is(err, io.EOF) && len(text) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if !errors.Is(err, bufio.ErrBufferFull) {
				return Result{}, fmt.Errorf("%s:%d: %w", file, line, err)
			}
			err = &ParseError{File: file, Line: line, Err: fmt.Errorf("line longer than %d bytes", maxLineBytes)}
			if err := sink.handle(err); err != nil {
				return Result{}, err
			}
			continue
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		if text[0] == ';' {
			// A start time that comes after jobs would move the jobs
			// already read: only the header before the first job sets it.
			err := h.parse(text[1:], sink.n == 0 && sink.res.Skipped == 0)
			if err != nil {
				err = &ParseError{File: file, Line: line, Err: err}
			}
			if err := sink.handle(err); err != nil {
				return Result{}, err
			}
			continue
		}
		var f swfLine
		err = f.split(text, file, line)
		var job cluster.Job
		if err == nil {
			job, err = p.job(&f)
		}
		if err == nil {
			err = p.checkDuplicate(seen, &f, &job)
		}
		if err == nil {
			err = sink.add(job, file, line)
		}
		if err := sink.handle(err); err != nil {
			return Result{}, err
		}
	}
	res := sink.result()
	if !h.hasStart {
		res.Missing = append(res.Missing, fmt.Sprintf("UnixStartTime: the header gives none, so submit times count from %s and hours of day and weekdays are arbitrary", opt.epoch().Format(time.RFC3339)))
	}
	return res, nil
}

// readBoundedLine returns the next line without its newline; a line over
// maxLineBytes is skipped to its end and reported as bufio.ErrBufferFull.
func readBoundedLine(br *bufio.Reader) ([]byte, error) {
	text, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return text, err
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = br.ReadSlice('\n')
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return nil, bufio.ErrBufferFull
}

// parse reads one header line (without its ';'). Lines that are not
// "Key: value" are comments; a key the reader uses with a bad value is an
// error.
func (h *swfHeader) parse(text []byte, first bool) error {
	key, val, ok := bytes.Cut(text, []byte(":"))
	if !ok {
		return nil
	}
	k, v := string(bytes.TrimSpace(key)), string(bytes.TrimSpace(val))
	switch k {
	case "UnixStartTime":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return fmt.Errorf("header UnixStartTime: %q: want seconds since 1970", v)
		}
		if !first {
			return errors.New("header UnixStartTime after the first job: the jobs before it would move")
		}
		h.unixStart, h.hasStart = n, true
	case "MaxNodes", "MaxProcs":
		n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("header %s: %q: want a non-negative integer", k, v)
		}
		if k == "MaxNodes" {
			h.maxNodes = n
		} else {
			h.maxProcs = n
		}
	case "Partition", "Queue":
		// "Partition: 3 batch": a number and its name.
		num, name, _ := strings.Cut(v, " ")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil // free text under a known key: a comment
		}
		if name = strings.ToValidUTF8(strings.TrimSpace(name), "\uFFFD"); name != "" {
			if k == "Partition" {
				h.partitions[n] = name
			} else {
				h.queues[n] = name
			}
		}
	}
	return nil
}

// swfLine is one job line split into its fields.
type swfLine struct {
	line   int
	raw    [swfNumFields][]byte
	num    [swfNumFields]int64 // the fields read as integers (-1 unknown)
	avgCPU float64             // field 6 may be fractional
}

// split cuts a job line into its 18 fields and parses them: integers, -1
// meaning unknown, and field 6 (average CPU time) possibly fractional.
func (f *swfLine) split(text []byte, file string, line int) error {
	f.line = line
	n := 0
	for len(text) > 0 {
		i := 0
		for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
			i++
		}
		text = text[i:]
		if len(text) == 0 {
			break
		}
		j := 0
		for j < len(text) && text[j] != ' ' && text[j] != '\t' && text[j] != '\r' {
			j++
		}
		if n == swfNumFields {
			return &ParseError{File: file, Line: line, Err: fmt.Errorf("more than %d fields", swfNumFields)}
		}
		f.raw[n] = text[:j]
		n++
		text = text[j:]
		for len(text) > 0 && text[0] == '\r' {
			text = text[1:]
		}
	}
	if n != swfNumFields {
		return &ParseError{File: file, Line: line, Err: fmt.Errorf("%d fields, want %d", n, swfNumFields)}
	}
	for i := range f.raw {
		if i == swfAvgCPU || i == swfUsedMem || i == swfReqMem {
			v, err := strconv.ParseFloat(string(f.raw[i]), 64)
			switch {
			case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
				return f.fieldError(file, i, errNotNumber)
			case v < 0 && v != -1:
				return f.fieldError(file, i, errSWFNegative)
			case v > maxSeconds*1e3:
				return f.fieldError(file, i, errTooLarge)
			}
			f.num[i] = int64(math.Round(v))
			if i == swfAvgCPU {
				f.avgCPU = v
			}
			continue
		}
		v, err := parseSWFInt(f.raw[i])
		if err != nil {
			return f.fieldError(file, i, err)
		}
		f.num[i] = v
	}
	return nil
}

var errSWFNegative = errors.New("negative (only -1 means unknown)")

// parseSWFInt reads an integer field: -1 or 0..maxSeconds (every SWF
// quantity, seconds, processors, KB or an id, fits that bound).
func parseSWFInt(b []byte) (int64, error) {
	if len(b) == 2 && b[0] == '-' && b[1] == '1' {
		return -1, nil
	}
	var v int64
	if len(b) == 0 {
		return 0, errNotNumber
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			if c == '-' {
				return 0, errSWFNegative
			}
			if _, err := strconv.ParseFloat(string(b), 64); err == nil {
				return 0, errNotInteger
			}
			return 0, errNotNumber
		}
		v = v*10 + int64(c-'0')
		if v > maxSeconds {
			return 0, fmt.Errorf("%w (over %d)", errTooLarge, int64(maxSeconds))
		}
	}
	return v, nil
}

func (f *swfLine) fieldError(file string, i int, err error) *ParseError {
	return &ParseError{File: file, Line: f.line, Field: swfFields[i], Value: string(f.raw[i]), Err: err}
}

// swfParser turns split lines into jobs.
type swfParser struct {
	file  string
	h     *swfHeader
	strs  map[string]string // interned names and label values
	epoch time.Time         // where submit times count from without UnixStartTime
}

func (p *swfParser) intern(prefix string, v int64) string {
	var buf [48]byte
	b := strconv.AppendInt(append(buf[:0], prefix...), v, 10)
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	p.strs[s] = s
	return s
}

func (p *swfParser) job(f *swfLine) (cluster.Job, error) {
	v := &f.num
	if v[swfSubmit] < 0 {
		return cluster.Job{}, f.fieldError(p.file, swfSubmit, errors.New("unknown (-1): a job needs a submit time"))
	}
	procs := v[swfAlloc]
	if procs <= 0 {
		procs = v[swfReqProcs]
	}
	if procs > MaxJobGPUs {
		return cluster.Job{}, f.fieldError(p.file, swfAlloc, fmt.Errorf("%w (over %d processors)", errTooLarge, MaxJobGPUs))
	}
	spec := cluster.JobSpec{Tier: cluster.DefaultTier, GPUs: int(max(procs, 0))}
	if spec.GPUs > 0 {
		spec.GPUMilli = cluster.MilliGPU
	}
	if v[swfUser] >= 0 {
		spec.User = p.intern("user-", v[swfUser])
	}
	switch {
	case v[swfGroup] >= 0:
		spec.Tenant = p.intern("group-", v[swfGroup])
	default:
		spec.Tenant = spec.User
	}
	if v[swfExec] >= 0 {
		spec.Name = p.intern("app-", v[swfExec])
	}
	if v[swfReqTime] > 0 {
		spec.TimeLimit = time.Duration(v[swfReqTime]) * time.Second
	}
	p.labels(f, &spec)

	if v[swfJob] < 0 {
		return cluster.Job{}, f.fieldError(p.file, swfJob, errors.New("unknown (-1): a job needs a number"))
	}
	submit := p.epoch.Add(time.Duration(v[swfSubmit]) * time.Second)
	if p.h.hasStart {
		submit = time.Unix(p.h.unixStart+v[swfSubmit], 0).UTC()
	}
	job := cluster.NewJob(cluster.JobID(strconv.FormatInt(v[swfJob], 10)), spec, submit)
	switch v[swfStatus] {
	case swfCompleted, swfPartialDone, -1:
		job.State = cluster.StateSucceeded
	case swfFailed, swfPartialFailed:
		job.State = cluster.StateFailed
	case swfCancelled, swfPartial:
		job.State = cluster.StateCancelled
	default:
		return cluster.Job{}, f.fieldError(p.file, swfStatus, errors.New("not an SWF status (0 failed, 1 completed, 2-4 partial, 5 cancelled, -1 unknown)"))
	}
	wait, run := v[swfWait], v[swfRun]
	started := run >= 0 && wait >= 0 && !(job.State == cluster.StateCancelled && v[swfAlloc] <= 0 && run == 0)
	switch {
	case started:
		job.Attempts = 1
		job.StartTime = submit.Add(time.Duration(wait) * time.Second)
		job.EndTime = job.StartTime.Add(time.Duration(run) * time.Second)
		job.Outcome.RunTime = time.Duration(run) * time.Second
	case wait >= 0:
		job.EndTime = submit.Add(time.Duration(wait) * time.Second)
	}
	return job, nil
}

// labels carries the fields the job model has no place for.
func (p *swfParser) labels(f *swfLine, s *cluster.JobSpec) {
	v := &f.num
	set := func(k, val string) {
		if s.Labels == nil {
			s.Labels = make(map[string]string, 4)
		}
		s.Labels[k] = val
	}
	if n := v[swfPartition]; n >= 0 {
		name, ok := p.h.partitions[n]
		if !ok {
			name = p.intern("", n)
		}
		set(LabelPartition, name)
	}
	if n := v[swfQueue]; n >= 0 {
		name, ok := p.h.queues[n]
		if !ok {
			name = p.intern("", n)
		}
		set(LabelQueue, name)
	}
	for _, i := range []int{swfUsedMem, swfReqProcs, swfReqMem, swfPreceding, swfThink} {
		if v[i] >= 0 {
			set(LabelSWFPrefix+swfLabelNames[i], p.intern("", v[i]))
		}
	}
	if f.avgCPU >= 0 {
		set(LabelSWFPrefix+swfLabelNames[swfAvgCPU], strconv.FormatFloat(f.avgCPU, 'f', -1, 64))
	}
	if st := v[swfStatus]; st != swfCompleted {
		set(LabelSWFPrefix+"status", p.intern("", st))
	}
}

// swfLabelNames are the label names (after LabelSWFPrefix) of the fields
// kept as labels.
var swfLabelNames = map[int]string{
	swfAvgCPU: "avg_cpu_time_s", swfUsedMem: "used_memory_kb", swfReqProcs: "requested_processors",
	swfReqMem: "requested_memory_kb", swfPreceding: "preceding_job", swfThink: "think_time_s",
}

// checkDuplicate rejects a job number seen before, except on partial
// executions (status 2-4), which share their job's number: those get IDs
// "N.L" with L their line.
func (p *swfParser) checkDuplicate(seen map[int64]int, f *swfLine, j *cluster.Job) error {
	n := f.num[swfJob]
	if st := f.num[swfStatus]; st == swfPartial || st == swfPartialDone || st == swfPartialFailed {
		j.ID = cluster.JobID(strconv.FormatInt(n, 10) + "." + strconv.Itoa(f.line))
		return nil
	}
	if first, dup := seen[n]; dup {
		return &ParseError{File: p.file, Line: f.line, Field: swfFields[swfJob], Value: string(f.raw[swfJob]),
			Err: fmt.Errorf("%w: first on line %d", errDuplicateID, first)}
	}
	seen[n] = f.line
	return nil
}

// swfFleet builds the machine an SWF log's header describes: MaxNodes
// nodes of MaxProcs/MaxNodes processors each (node-0001, ...). A header
// without MaxProcs is an error; without MaxNodes, every processor is a
// node of one.
func swfFleet(path string) (*cluster.Fleet, error) {
	rc, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	h := swfHeader{partitions: map[int64]string{}, queues: map[int64]string{}}
	for line := 1; ; line++ {
		text, err := readBoundedLine(br)
		if err != nil && len(text) == 0 {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("fleet %s:%d: %w", path, line, err)
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		if text[0] != ';' {
			break // the header ends at the first job
		}
		if err := h.parse(text[1:], true); err != nil {
			return nil, fmt.Errorf("fleet %s:%d: %w", path, line, err)
		}
	}
	return h.fleet(path)
}

func (h *swfHeader) fleet(file string) (*cluster.Fleet, error) {
	if h.maxProcs <= 0 {
		return nil, fmt.Errorf("fleet %s: the header gives no MaxProcs, so the machine's size is unknown", file)
	}
	nodes := h.maxNodes
	if nodes <= 0 {
		nodes = h.maxProcs
	}
	per := h.maxProcs / nodes
	switch {
	case nodes > maxUniformNodes:
		return nil, fmt.Errorf("fleet %s: MaxNodes %d is over %d", file, nodes, maxUniformNodes)
	case per < 1 || per > maxNodeGPUs:
		return nil, fmt.Errorf("fleet %s: MaxProcs/MaxNodes = %d/%d gives %d processors a node, want 1..%d", file, h.maxProcs, nodes, per, maxNodeGPUs)
	}
	width := max(4, len(strconv.FormatInt(nodes, 10)))
	fleet := &cluster.Fleet{Name: fmt.Sprintf("swf-%dx%d", nodes, per), Nodes: make([]cluster.Node, nodes)}
	for i := range fleet.Nodes {
		fleet.Nodes[i] = newNode(fmt.Sprintf("node-%0*d", width, i+1), int(per), SWFProcessorModel)
	}
	return validFleet(fleet, file)
}
