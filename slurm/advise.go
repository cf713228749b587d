package slurm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// Estimate is what the models say of a job: its forecast run time
// (median) and the time limit the limit policy recommends (zero: keep the
// user's; never above it).
type Estimate struct {
	RunP50 time.Duration
	Limit  time.Duration
	// Source names the model; LimitWhy says why Limit (the policy's
	// words: "would have covered 96.5% of comparable jobs' runs").
	Source, LimitWhy string
}

// Advice is Prescient's word on a pending job.
// Its JSON gives the durations in seconds: user_limit_s,
// recommended_limit_s, run_p50_s.
type Advice struct {
	Job       string `json:"job"`
	Name      string `json:"name"`
	User      string `json:"user"`
	Account   string `json:"account"`
	Partition string `json:"partition"`
	GPUs      int64  `json:"gpus"`
	// Tasks is a pending job array's tasks still pending (1 for a job);
	// End is when the last of them is predicted to end.
	Tasks int `json:"tasks"`
	// ArrayTasks is a pending array's task list as squeue writes it
	// ("1-20"; its JOBID is then "Job_[1-20]").
	ArrayTasks string        `json:"array_tasks,omitempty"`
	UserLimit  time.Duration `json:"-"` // zero: none
	Limit      time.Duration `json:"-"` // recommended; zero: keep the user's
	RunP50     time.Duration `json:"-"`
	// Start and End are the predicted start and end; zero when the start
	// falls beyond the horizon (StartAfter then) or the job is held.
	Start      time.Time `json:"predicted_start,omitzero"`
	End        time.Time `json:"predicted_end,omitzero"`
	StartAfter time.Time `json:"predicted_start_after,omitzero"`
	Reason     string    `json:"reason"`
}

// Lowers says whether the recommended limit is below the user's own (or
// the user set none).
func (a *Advice) Lowers() bool { return a.Limit > 0 && (a.UserLimit == 0 || a.Limit < a.UserLimit) }

// adviceJSON is Advice as JSON: durations in seconds, and Lowers.
type adviceJSON struct {
	plainAdvice
	UserLimitS float64 `json:"user_limit_s,omitempty"`
	LimitS     float64 `json:"recommended_limit_s,omitempty"`
	RunP50S    float64 `json:"run_p50_s,omitempty"`
	Lowers     bool    `json:"lowers"`
}

type plainAdvice Advice

// MarshalJSON writes a's durations in seconds, and whether it lowers the
// user's limit ("lowers").
func (a Advice) MarshalJSON() ([]byte, error) {
	return json.Marshal(adviceJSON{plainAdvice(a), a.UserLimit.Seconds(), a.Limit.Seconds(), a.RunP50.Seconds(), a.Lowers()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Advice) UnmarshalJSON(b []byte) error {
	var j adviceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = Advice(j.plainAdvice)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	a.UserLimit, a.Limit, a.RunP50 = sec(j.UserLimitS), sec(j.LimitS), sec(j.RunP50S)
	return nil
}

// Horizon is how far predicted starts reach; a job that does not start
// within it has StartAfter.
const Horizon = 7 * 24 * time.Hour

// Advise predicts, for every pending job, its start and end and gives the
// recommended limit, from the estimates of the pending and running jobs
// (by job ID; a job without one runs to its limit, or a day).
//
// Starts come from each partition's GPUs (CPUs for jobs without GPUs) as a
// whole, taken by the running jobs until their expected ends (their
// forecast end, or one step of the planner's raise ladder past it once
// outlived, never past their limit), then by the pending
// jobs in Slurm's priority order, each at the first time enough are free
// for its expected run (a job pending in several partitions in the first
// to fit it, an array's tasks in turn). It is Slurm's own plan with better
// run times; it does not see how GPUs split over nodes, reservations or
// QOS limits.
func Advise(snap Snapshot, est map[string]Estimate) []Advice {
	type key struct {
		partition string
		gpu       bool
	}
	capacity := map[key]int64{}
	for _, n := range snap.Nodes {
		if n.Has("DOWN") || n.Has("DRAIN") {
			continue
		}
		for _, p := range n.Partitions {
			capacity[key{p, true}] += n.GPUs
			capacity[key{p, false}] += n.CPUs
		}
	}
	need := func(j *Job) (gpu bool, n int64) {
		if j.GPUs > 0 {
			return true, j.GPUs
		}
		return false, max(j.CPUs, 1)
	}
	profiles := map[key]*profile{}
	prof := func(k key) *profile {
		p := profiles[k]
		if p == nil {
			p = newProfile(snap.Now, capacity[k])
			profiles[k] = p
		}
		return p
	}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if !j.Running() {
			continue
		}
		gpu, n := need(j)
		prof(key{j.Partition, gpu}).take(snap.Now, expectedEnd(j, est[j.ID], snap.Now), n)
	}
	pending := make([]*Job, 0, len(snap.Jobs))
	for i := range snap.Jobs {
		if snap.Jobs[i].Pending() {
			pending = append(pending, &snap.Jobs[i])
		}
	}
	slices.SortStableFunc(pending, func(a, b *Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Submit.Compare(b.Submit))
	})
	out := make([]Advice, 0, len(pending))
	for _, j := range pending {
		e, ok := est[j.ID]
		a := Advice{Job: j.ID, Name: j.Name, User: j.User, Account: j.Account, Partition: j.Partition, GPUs: j.GPUs,
			Tasks: max(j.Tasks, 1), ArrayTasks: j.ArrayTasks, UserLimit: j.TimeLimit,
			Limit: e.Limit, RunP50: e.RunP50}
		run := runFor(j, e)
		gpu, n := need(j)
		// A job pending in several partitions starts in whichever runs it first.
		var best *profile
		var most int64
		for _, p := range j.Partitions() {
			k := key{p, gpu}
			most = max(most, capacity[k])
			if j.Held() || n > capacity[k] {
				continue
			}
			if start, ok := prof(k).fit(n, run, snap.Now.Add(Horizon)); ok && (best == nil || start.Before(a.Start)) {
				best, a.Start = prof(k), start
			}
		}
		switch {
		case j.Held():
			a.Reason = "held: no start predicted"
		case n > most:
			a.Reason = fmt.Sprintf("asks for %d of the partition's %d", n, most)
		case best == nil:
			a.StartAfter = snap.Now.Add(Horizon)
		default:
			a.End = planTasks(best, j, a.Start, n, run, snap.Now.Add(Horizon))
			if a.End.IsZero() {
				a.Reason = "its last tasks start beyond the horizon: no end predicted"
			}
			if j.Tasks > MaxPlannedTasks {
				a.Reason = fmt.Sprintf("planned its first %d of %d tasks", MaxPlannedTasks, j.Tasks)
			}
		}
		if ok {
			a.Reason = strings.TrimPrefix(a.Reason+"; ", "; ") + reason(&a, e)
		} else {
			a.Reason = strings.TrimPrefix(a.Reason+"; ", "; ") + "no forecast: planned with its own limit"
		}
		out = append(out, a)
	}
	return out
}

// MaxPlannedTasks bounds the tasks of one array that Advise plans: the
// rest are left out of the plan (and its reason says so).
const MaxPlannedTasks = 1000

// planTasks takes the profile for a pending job's tasks (one, or an
// array's first MaxPlannedTasks, at most MaxTasks of them at once), the
// first at start, and returns when the last ends; zero when one does not
// start before horizon.
func planTasks(p *profile, j *Job, start time.Time, n int64, run time.Duration, horizon time.Time) time.Time {
	tasks := min(max(j.Tasks, 1), MaxPlannedTasks)
	var ends []time.Time // of the tasks planned, in order
	var last time.Time
	for i := range tasks {
		from := start
		if j.MaxTasks > 0 && i >= j.MaxTasks { // waits for a running task of its own to end
			from = later(from, ends[i-j.MaxTasks])
		}
		at, ok := p.fitFrom(from, n, run, horizon)
		if !ok {
			return time.Time{}
		}
		end := at.Add(run)
		p.take(at, end, n)
		ends = append(ends, end)
		last = later(last, end)
	}
	return last
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func reason(a *Advice, e Estimate) string {
	switch {
	case a.Lowers():
		return strings.TrimSuffix(fmt.Sprintf("expected run %s (%s); a %sm limit %s", roundD(e.RunP50), e.Source,
			Minutes(e.Limit), e.LimitWhy), " ")
	default:
		return fmt.Sprintf("expected run %s (%s); its own limit stands (too few comparable jobs, or none tighter)",
			roundD(e.RunP50), e.Source)
	}
}

func roundD(d time.Duration) time.Duration { return d.Round(time.Second) }

// runFor is how long a pending job is expected to run: its forecast,
// never past its limit; without one, its limit, or a day.
func runFor(j *Job, e Estimate) time.Duration {
	run := e.RunP50
	if run <= 0 {
		run = cmp.Or(j.TimeLimit, 24*time.Hour)
	}
	if j.TimeLimit > 0 {
		run = min(run, j.TimeLimit)
	}
	return max(run, time.Minute)
}

// expectedEnd is when a running job is expected to end, by the
// planner's rule for running jobs (executor.Remaining): start plus its
// forecast; once it has outlived that, one more step of the raise ladder;
// never past its limit.
func expectedEnd(j *Job, e Estimate, now time.Time) time.Time {
	return now.Add(executor.Remaining(runFor(j, e), now.Sub(j.Start), j.TimeLimit))
}

// profile is a resource's free units over time: segments, each free from
// its start to the next one's, the last for ever (Slurm's backfill keeps
// the same map). fit and take are linear in the segments.
type profile struct {
	segs []segment
}

type segment struct {
	t    time.Time
	free int64
}

func newProfile(now time.Time, capacity int64) *profile {
	return &profile{segs: []segment{{now, capacity}}}
}

// split makes a segment start at t (not before the first) and returns its
// index.
func (p *profile) split(t time.Time) int {
	if !t.After(p.segs[0].t) {
		return 0
	}
	i, found := slices.BinarySearchFunc(p.segs, t, func(s segment, t time.Time) int { return s.t.Compare(t) })
	if found {
		return i
	}
	p.segs = slices.Insert(p.segs, i, segment{t, p.segs[i-1].free})
	return i
}

// take takes n units over [from, to).
func (p *profile) take(from, to time.Time, n int64) {
	if !to.After(from) {
		return
	}
	i, j := p.split(from), p.split(to)
	for k := i; k < j; k++ {
		p.segs[k].free -= n
	}
}

// fit is the first time, not after horizon, from which n units are free
// for run.
func (p *profile) fit(n int64, run time.Duration, horizon time.Time) (time.Time, bool) {
	return p.fitFrom(p.segs[0].t, n, run, horizon)
}

// fitFrom is fit for starts not before from.
func (p *profile) fitFrom(from time.Time, n int64, run time.Duration, horizon time.Time) (time.Time, bool) {
	for i := p.split(from); i < len(p.segs) && !p.segs[i].t.After(horizon); {
		if p.segs[i].free < n {
			i++
			continue
		}
		end := p.segs[i].t.Add(run)
		k := i + 1
		for k < len(p.segs) && p.segs[k].t.Before(end) && p.segs[k].free >= n {
			k++
		}
		if k == len(p.segs) || !p.segs[k].t.Before(end) {
			return p.segs[i].t, true
		}
		i = k + 1 // segment k is short of units: no start before it fits
	}
	return time.Time{}, false
}

// commentTag marks Prescient's part of a job's AdminComment.
var commentTag = regexp.MustCompile(`\s*\[prescient: [^\]]*\]`)

// Comment is what Prescient appends to a job's AdminComment: a short
// bracketed note that replaces its earlier one and leaves the rest alone.
func Comment(a Advice) string {
	var b strings.Builder
	b.WriteString("[prescient:")
	if a.Lowers() {
		fmt.Fprintf(&b, " limit %sm", Minutes(a.Limit))
	}
	if a.RunP50 > 0 {
		fmt.Fprintf(&b, " run~%sm", Minutes(a.RunP50))
	}
	switch {
	case !a.Start.IsZero():
		fmt.Fprintf(&b, " start~%s", a.Start.UTC().Format("2006-01-02T15:04Z"))
	case !a.StartAfter.IsZero():
		fmt.Fprintf(&b, " start>%s", a.StartAfter.UTC().Format("2006-01-02T15:04Z"))
	}
	b.WriteString("]")
	return b.String()
}

// NoteChanged says whether the note in comment says something else than
// a's would: another limit or run time, or a start that moved by more
// than a quarter of the time to it (at least 15 minutes). Starts drift
// as jobs run; rewriting every pending job's comment each cycle would load
// slurmctld for nothing.
func NoteChanged(comment string, a Advice, now time.Time) bool {
	old := commentTag.FindString(comment)
	if old == "" {
		return true
	}
	fields := func(note string) (rest string, start time.Time) {
		var keep []string
		for _, f := range strings.Fields(strings.Trim(strings.TrimSpace(note), "[]")) {
			if v, ok := strings.CutPrefix(f, "start~"); ok {
				start, _ = time.Parse("2006-01-02T15:04Z", v)
				continue
			}
			if v, ok := strings.CutPrefix(f, "start>"); ok { // beyond the horizon, which moves
				start, _ = time.Parse("2006-01-02T15:04Z", v)
				f = "start>"
			}
			keep = append(keep, f)
		}
		return strings.Join(keep, " "), start
	}
	oldRest, oldStart := fields(old)
	newRest, newStart := fields(Comment(a))
	if oldRest != newRest || oldStart.IsZero() != newStart.IsZero() {
		return true
	}
	away := min(oldStart.Sub(now), newStart.Sub(now))
	return (newStart.Sub(oldStart)).Abs() > max(15*time.Minute, away/4)
}

// WithComment is existing with Prescient's earlier note replaced by note.
func WithComment(existing, note string) string { return withTag(existing, commentTag, note) }

// WithoutComment is existing with Prescient's note taken out.
func WithoutComment(existing string) string { return withTag(existing, commentTag, "") }

// withTag is existing with what tag matches taken out and text, unless
// empty, put at the end: how Prescient's note and marks share a job's
// AdminComment with the site's text and each other.
func withTag(existing string, tag *regexp.Regexp, text string) string {
	rest := strings.TrimSpace(tag.ReplaceAllString(existing, ""))
	if rest == "" || text == "" {
		return rest + text
	}
	return rest + " " + text
}
