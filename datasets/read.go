package datasets

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// DefaultMaxErrors is how many row errors a lenient read keeps in
// Result.Errors when ReadOptions.MaxErrors is zero.
const DefaultMaxErrors = 20

// ReadOptions tune how a trace is read.
type ReadOptions struct {
	// Lenient keeps the good rows and counts the bad ones (Result.Skipped)
	// instead of failing on the first bad row. A bad header, an I/O error or
	// a broken gzip stream still fails the read.
	Lenient bool
	// Epoch is the time that traces whose times are offsets (openb) count
	// from; zero means DefaultOpenbEpoch(). It must lie in the years 1 to
	// 9949.
	Epoch time.Time
	// MaxErrors is how many row errors a lenient read keeps in
	// Result.Errors; zero means DefaultMaxErrors. Negative is an error.
	MaxErrors int
	// Specs reads Prescient JSONL rows as job specs to forecast (predict),
	// not a history: a row without a state is queued, one without a
	// submit_time is submitted at Now (zero: the time of the read).
	Specs bool
	Now   time.Time
}

// DefaultOpenbEpoch is the time openb's offsets count from when
// ReadOptions.Epoch is zero: 2023-01-01T00:00:00Z. The trace publishes no
// absolute times, so the date is arbitrary (the year the trace came out),
// and so are the hours of day and weekdays of openb jobs.
func DefaultOpenbEpoch() time.Time { return time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC) }

// Validate rejects options no read could honour.
func (o ReadOptions) Validate() error {
	if o.MaxErrors < 0 {
		return fmt.Errorf("read options: max errors %d is negative", o.MaxErrors)
	}
	if !o.Epoch.IsZero() && (o.Epoch.Year() < 1 || o.Epoch.Year() > maxEpochYear) {
		return fmt.Errorf("read options: epoch %s is outside the years 1 to %d", o.Epoch.Format(time.RFC3339), maxEpochYear)
	}
	return nil
}

// maxEpochYear leaves room for offsets of up to 50 years before year 9999,
// the last that times can be written in.
const maxEpochYear = 9949

func (o ReadOptions) maxErrors() int {
	if o.MaxErrors == 0 {
		return DefaultMaxErrors
	}
	return o.MaxErrors
}

func (o ReadOptions) epoch() time.Time {
	if o.Epoch.IsZero() {
		return DefaultOpenbEpoch()
	}
	return o.Epoch.UTC()
}

// Result is what a trace reader returns.
type Result struct {
	// Jobs are sorted by SubmitTime, ties by ID.
	Jobs []cluster.Job
	// Skipped counts the rows a lenient read rejected.
	Skipped int
	// Errors holds the first MaxErrors row errors of a lenient read, each a
	// *ParseError.
	Errors []error
	// Missing names the columns of the format the file lacks and what
	// their absence leaves out, one sentence each (a format that allows
	// it: openb's published variants).
	Missing []string
	// Untimed is set when the file gives no times or outcomes: its jobs
	// are requests for placement experiments, not a history to replay.
	Untimed bool
}

// ParseError locates a bad row or header: the file, the 1-based line (a
// CSV header is line 1) and the field with its value. Field is empty when
// the row as a whole is bad.
type ParseError struct {
	File  string
	Line  int
	Field string
	Value string
	Err   error // what is wrong; errors.Is/As see it through Unwrap
}

// maxValueInError bounds how much of a bad value an error message repeats.
const maxValueInError = 64

// Error reads like `philly_jobs.csv:12: field duration: "abc": not a number`.
func (e *ParseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	v := e.Value
	if len(v) > maxValueInError {
		v = v[:maxValueInError] + "..."
	}
	return fmt.Sprintf("%s:%d: field %s: %q: %v", e.File, e.Line, e.Field, v, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// jobSink gathers a reader's jobs and, in lenient mode, its row errors.
type jobSink struct {
	opt    ReadOptions
	res    Result
	chunks [][]cluster.Job       // the jobs so far, in chunks of jobChunk
	n      int                   // jobs in chunks
	seen   map[cluster.JobID]int // line of each ID, when IDs come from the file
}

// Jobs are large, and growing one slice of tens of thousands of them by
// append costs more than parsing them: a sink keeps them in chunks that
// double from minJobChunk to maxJobChunk jobs and copies each job once, in
// order, at the end.
const (
	minJobChunk = 16
	maxJobChunk = 4096
)

func newJobSink(opt ReadOptions, checkIDs bool) *jobSink {
	s := &jobSink{opt: opt}
	if checkIDs {
		s.seen = make(map[cluster.JobID]int)
	}
	return s
}

// add keeps a parsed job after validating it and checking that its ID is
// new. A rejected job comes back as a *ParseError for handle.
func (s *jobSink) add(j cluster.Job, file string, line int) error {
	if err := j.Validate(); err != nil {
		return &ParseError{File: file, Line: line, Err: err}
	}
	if s.seen != nil {
		if first, dup := s.seen[j.ID]; dup {
			return &ParseError{File: file, Line: line, Field: "id", Value: string(j.ID),
				Err: fmt.Errorf("%w: first on line %d", errDuplicateID, first)}
		}
		s.seen[j.ID] = line
	}
	s.keep(j)
	return nil
}

func (s *jobSink) keep(j cluster.Job) {
	n := len(s.chunks)
	if n == 0 || len(s.chunks[n-1]) == cap(s.chunks[n-1]) {
		size := minJobChunk
		if n > 0 {
			size = min(maxJobChunk, 2*cap(s.chunks[n-1]))
		}
		s.chunks = append(s.chunks, make([]cluster.Job, 0, size))
		n++
	}
	s.chunks[n-1] = append(s.chunks[n-1], j)
	s.n++
}

// handle decides what a row's error means for the read: nil goes on; a
// *ParseError is returned in strict mode and counted in lenient mode; any
// other error (I/O, gzip) ends the read.
func (s *jobSink) handle(err error) error {
	var pe *ParseError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	if !s.opt.Lenient {
		return pe
	}
	s.res.Skipped++
	if len(s.res.Errors) < s.opt.maxErrors() {
		s.res.Errors = append(s.res.Errors, pe)
	}
	return nil
}

// result returns the jobs sorted by submit time, ties by ID.
func (s *jobSink) result() Result {
	ptrs := make([]*cluster.Job, 0, s.n)
	for _, c := range s.chunks {
		for i := range c {
			ptrs = append(ptrs, &c[i])
		}
	}
	s.res.Jobs = sortedCopy(ptrs)
	return s.res
}

// sortJobs sorts jobs by SubmitTime, ties by ID, keeping the order of jobs
// equal in both.
func sortJobs(jobs []cluster.Job) {
	for i := 1; i < len(jobs); i++ {
		if compareJobs(&jobs[i-1], &jobs[i]) > 0 {
			ptrs := make([]*cluster.Job, len(jobs))
			for k := range jobs {
				ptrs[k] = &jobs[k]
			}
			copy(jobs, sortedCopy(ptrs))
			return
		}
	}
}

// sortedCopy returns copies of the jobs sorted by SubmitTime, ties by ID,
// keeping the order of jobs equal in both. Jobs are large: it sorts
// pointers and copies each job once.
func sortedCopy(ptrs []*cluster.Job) []cluster.Job {
	slices.SortStableFunc(ptrs, compareJobs)
	out := make([]cluster.Job, len(ptrs))
	for i, p := range ptrs {
		out[i] = *p
	}
	return out
}

func compareJobs(a, b *cluster.Job) int {
	return cmp.Or(a.SubmitTime.Compare(b.SubmitTime), cmp.Compare(a.ID, b.ID))
}

// Errors a field parser reports; ParseError wraps them.
var (
	errNotNumber    = errors.New("not a number")
	errNotInteger   = errors.New("not an integer")
	errNotFinite    = errors.New("not a finite number")
	errNegative     = errors.New("is negative")
	errTooLarge     = errors.New("is too large")
	errEmpty        = errors.New("empty")
	errDuplicateID  = errors.New("duplicate job id")
	errUnknownValue = errors.New("unknown value")
)
