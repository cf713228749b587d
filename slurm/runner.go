package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/internal/fsutil"
)

// Estimator gives the models' estimates for jobs and learns from the
// jobs that ended.
type Estimator interface {
	// Estimate returns estimates by job ID; a job it cannot estimate is
	// left out.
	Estimate(ctx context.Context, jobs []Job) (map[string]Estimate, error)
	// Learn hears the jobs that ended, as sacct --json gives them.
	Learn(ctx context.Context, accounting []byte) error
}

// Event is one change made to the cluster (or tried): the audit trail.
type Event struct {
	Time time.Time `json:"time"`
	Action
	Error string `json:"error,omitempty"`
}

// Runner runs the advisor and autopilot over a Slurm cluster: a cycle
// reads the cluster, asks the estimator, advises, decides and acts, and
// keeps what it changed in Dir (state.json, written atomically after each
// cycle) and every change in Dir/events.jsonl. A restarted Runner picks up
// the state where it was; one Runner at a time holds Dir (a lock file).
type Runner struct {
	Client    Client
	Estimator Estimator
	Config    Config
	Dir       string
	Now       func() time.Time
	Log       *slog.Logger
	// Warmup is how far back the first accounting read reaches (default
	// an hour); later reads start where the last one ended.
	Warmup time.Duration
	// Metrics, when set, are kept up to date (NewMetrics).
	Metrics *Metrics
	// Carbon reads the grid's carbon intensity for the Config's Holder
	// each cycle. When a read fails the last one read serves; with none
	// (or no Carbon) nothing is held, and the jobs held are released.
	Carbon func(ctx context.Context) (executor.Carbon, error)

	mu       sync.Mutex
	state    State
	advice   []Advice
	events   []Event // the latest, for the API
	learned  time.Time
	ages     bool            // the priority settings were read and let Nice order jobs
	carbon   executor.Carbon // the last intensity read
	loaded   bool
	refused  map[changeKey]refusal // changes that failed, waiting to be tried again
	eventLog *os.File
	lock     *os.File // Dir/lock, flocked while the Runner holds Dir
}

// ErrLocked is returned when another Runner, in this process or another,
// holds the state folder.
var ErrLocked = errors.New("another prescient slurm holds the state folder")

const maxEvents = 1000

// Cycle runs one cycle.
func (r *Runner) Cycle(ctx context.Context) (err error) {
	if err := r.load(); err != nil {
		return err
	}
	now, began := r.Now(), time.Now()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.Metrics.cycle(err, time.Since(began), r.Now(), r.advice, &r.state)
	}()
	// 1. Read the cluster.
	snap, err := r.snapshot(ctx, now)
	if err != nil {
		return err
	}
	if err := r.Config.checkPartitions(snap.Nodes); err != nil {
		return err
	}
	if len(r.Config.Order) > 0 {
		if err := r.readPriority(ctx, &snap); err != nil {
			return err
		}
	}
	if r.Config.Holder != nil && r.Carbon != nil {
		if c, err := r.Carbon(ctx); err != nil {
			r.Log.Warn("slurm: carbon intensity not read; the last one read serves", "err", err)
		} else {
			r.carbon = c
		}
		snap.Carbon = r.carbon
	}
	// 2. Learn from the jobs that ended since the last cycle.
	since := r.learned
	if since.IsZero() {
		since = now.Add(-cmp.Or(r.Warmup, time.Hour))
	}
	if acct, err := r.Client.Accounting(ctx, since); err != nil {
		r.Log.Warn("slurm: accounting not read; the limit calibration waits", "err", err)
	} else if err := r.Estimator.Learn(ctx, acct); err != nil {
		r.Log.Warn("slurm: accounting not learned from", "err", err)
	} else {
		r.learned = now
	}
	// 3. Estimate, advise, decide.
	var live []Job
	for _, j := range snap.Jobs {
		if j.Live() {
			live = append(live, j)
		}
	}
	est, err := r.Estimator.Estimate(ctx, live)
	if err != nil {
		return fmt.Errorf("slurm: estimates: %w", err)
	}
	advice := Advise(snap, est)
	r.mu.Lock()
	r.state.Observe(snap)
	acts := Decide(r.Config, snap, advice, &r.state)
	jobs := snap.byID()
	for i := range advice { // before the restores: the user's limit of a job restored now is in the state
		advice[i].UserLimit = r.state.UserLimit(jobs[advice[i].Job])
	}
	r.mu.Unlock()
	// 4. Act, then keep the state and publish the advice.
	r.apply(ctx, r.holdBack(acts, now), now)
	r.mu.Lock()
	r.state.LastCycle = now
	for i := range advice { // a job it holds starts once released
		if until, ok := r.state.Held[advice[i].Job]; ok && until.After(now) {
			advice[i].Start, advice[i].End, advice[i].StartAfter = time.Time{}, time.Time{}, until
			advice[i].Reason = "held by Prescient for cleaner power until " + until.UTC().Format(time.RFC3339)
		}
	}
	r.advice = advice
	r.mu.Unlock()
	return r.save()
}

// readPriority reads the priority settings into snap. A Nice is worth a
// wait only if priorities grow with age: until a read has shown they do,
// a failure is the cycle's error (nothing changes); after, it is logged
// and the cycle goes on without ordering, so that restores and the other
// levers are not held up by it.
func (r *Runner) readPriority(ctx context.Context, snap *Snapshot) error {
	p, err := r.Client.Priority(ctx)
	if err == nil {
		err = p.Ages()
	} else {
		err = fmt.Errorf("slurm: priority settings: %w", err)
	}
	switch {
	case err == nil:
		snap.Priority, r.ages = p, true
	case !r.ages:
		return err
	default:
		r.Log.Warn("slurm: no ordering this cycle", "err", err)
	}
	return nil
}

// Stop undoes what the Runner changed: lowered limits and Nice values
// back to the users', held jobs released, parked nodes powered up. The state keeps what could not be undone.
func (r *Runner) Stop(ctx context.Context) error {
	if err := r.load(); err != nil {
		return err
	}
	snap, err := r.snapshot(ctx, r.Now())
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.state.Observe(snap)
	acts := Restore(snap, &r.state)
	r.mu.Unlock()
	r.apply(ctx, acts, r.Now())
	return errors.Join(r.save(), r.Close())
}

// RestoreIfStale restores what a Runner changed (as Stop does) when none
// holds the state folder and the last cycle ended more than after ago:
// the watchdog for a Prescient that was killed and not started again, to
// run from cron or a timer. restored says whether it did.
func (r *Runner) RestoreIfStale(ctx context.Context, after time.Duration) (restored bool, err error) {
	if err := r.load(); errors.Is(err, ErrLocked) {
		return false, nil // running: its own business
	} else if err != nil {
		return false, err
	}
	if r.Now().Sub(r.state.LastCycle) < after {
		return false, r.Close()
	}
	return true, r.Stop(ctx)
}

// Close lets go of the state folder, leaving the changes in place (a
// restart goes on from them).
func (r *Runner) Close() error {
	if !r.loaded {
		return nil
	}
	r.loaded = false
	return errors.Join(r.eventLog.Close(), r.lock.Close()) // closing the lock file releases the flock
}

// Advice is the latest cycle's advice, pending jobs in Slurm's order.
func (r *Runner) Advice() []Advice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.advice
}

// Events are the latest changes, oldest first.
func (r *Runner) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// State is a copy of what the Runner has changed.
func (r *Runner) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(r.state)
	var st State
	json.Unmarshal(b, &st)
	return st
}

func (r *Runner) snapshot(ctx context.Context, now time.Time) (Snapshot, error) {
	jobs, err := r.Client.Jobs(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("slurm: jobs: %w", err)
	}
	nodes, err := r.Client.Nodes(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("slurm: nodes: %w", err)
	}
	return Snapshot{Now: now, Jobs: jobs, Nodes: nodes}, nil
}

// MaxBatch is the most jobs one scontrol update changes.
const MaxBatch = 500

// apply makes the changes and records each; a change that fails is logged
// and recorded with its error, and tried again later (holdBack). Limits and
// Nice values set alike go in one scontrol update of up to MaxBatch jobs;
// when such a call fails, each of its jobs is tried alone, so that the
// error lands on the job it belongs to.
func (r *Runner) apply(ctx context.Context, acts []Action, now time.Time) {
	errs := r.updateInBatches(ctx, acts)
	for i, a := range acts {
		ev := Event{Time: r.Now(), Action: a}
		err, done := errs[i]
		if !done {
			err = r.change(ctx, a)
		}
		if err == nil {
			r.remember(a, ev.Time)
		}
		r.noteOutcome(a, err, now)
		r.Metrics.change(a.Kind, err)
		if err != nil {
			ev.Error = err.Error()
			r.Log.Warn("slurm: change failed", append(logAttrs(a), "err", err)...)
		} else if a.Kind != ActComment {
			r.Log.Info("slurm: changed", append(logAttrs(a), "reason", a.Reason)...)
		}
		r.record(ev)
	}
}

// logAttrs are what a log line says of a change: its kind and the
// fields it sets.
func logAttrs(a Action) []any {
	attrs := []any{"kind", a.Kind}
	if a.Job != "" {
		attrs = append(attrs, "job", a.Job)
	}
	if a.Node != "" {
		attrs = append(attrs, "node", a.Node)
	}
	if a.Limit > 0 {
		attrs = append(attrs, "limit", a.Limit)
	}
	if a.Nice != nil {
		attrs = append(attrs, "nice", *a.Nice)
	}
	if !a.Until.IsZero() {
		attrs = append(attrs, "until", a.Until)
	}
	return attrs
}

// updateInBatches makes the limit and Nice changes of acts (but a lower that
// sets a comment too, which goes alone: change), those of one
// value together, and returns their errors by index.
func (r *Runner) updateInBatches(ctx context.Context, acts []Action) map[int]error {
	type batch struct {
		u    Update
		acts []int
	}
	var keys []string
	batches := map[string]*batch{}
	for i, a := range acts {
		var u Update
		var key string
		switch a.Kind {
		case ActLower, ActRestore:
			if a.setsComment() { // a comment of its own: alone (change)
				continue
			}
			u, key = a.limitUpdate(), "TimeLimit="+Minutes(a.Limit)
		case ActNice, ActUnNice:
			if a.setsComment() { // a comment of its own: alone (change)
				continue
			}
			u, key = a.niceUpdate(), "Nice="+strconv.Itoa(*a.Nice)
		default:
			continue
		}
		if batches[key] == nil {
			batches[key] = &batch{u: u}
			keys = append(keys, key)
		}
		batches[key].acts = append(batches[key].acts, i)
	}
	errs := map[int]error{}
	for _, key := range keys {
		b := batches[key]
		for chunk := range slices.Chunk(b.acts, MaxBatch) {
			ids := make([]string, len(chunk))
			for k, i := range chunk {
				ids[k] = acts[i].Job
			}
			err := r.Client.Update(ctx, ids, b.u)
			for _, i := range chunk {
				if err != nil && len(chunk) > 1 {
					errs[i] = r.Client.Update(ctx, []string{acts[i].Job}, b.u)
				} else {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// change makes one change that updateInBatches does not.
func (r *Runner) change(ctx context.Context, a Action) error { return change(ctx, r.Client, a) }

// change makes one change through c. A hold that marks the comment sets
// the mark first, and a release that takes it off does so after: a mark
// never outlives, nor is missing from, a hold that Slurm keeps (at worst
// it marks a job not yet held, which the next cycle cleans).
func change(ctx context.Context, c Client, a Action) error {
	switch a.Kind {
	case ActComment:
		return c.Update(ctx, []string{a.Job}, Update{AdminComment: &a.Text})
	case ActLower, ActRestore:
		return c.Update(ctx, []string{a.Job}, a.limitUpdate())
	case ActNice, ActUnNice:
		return c.Update(ctx, []string{a.Job}, a.niceUpdate())
	case ActHold:
		if a.setsComment() {
			if err := c.Update(ctx, []string{a.Job}, Update{AdminComment: &a.Text}); err != nil {
				return err
			}
		}
		return c.Hold(ctx, a.Job)
	case ActRelease:
		if err := c.Release(ctx, a.Job); err != nil || !a.setsComment() {
			return err
		}
		return c.Update(ctx, []string{a.Job}, Update{AdminComment: &a.Text})
	case ActPowerDown:
		return c.PowerDown(ctx, a.Node, "prescient: "+a.Reason)
	case ActPowerUp:
		return c.PowerUp(ctx, a.Node)
	}
	return fmt.Errorf("slurm: no change of kind %q", a.Kind)
}

// Retrying a change that failed: after its n-th failure in a row it is
// tried again no sooner than RetryFirst × 2^(n−1) after the cycle it
// failed in, at most RetryMax. A change that Slurm refuses for good (a job
// that has just started, a value the site forbids) is then tried a few
// times an hour, not every cycle, and one that failed while slurmctld was
// away comes back within RetryMax of its return. Undoing Prescient's own
// changes (restores, releases, waking a node) is never held back: a
// lowered limit not given back in time kills the job.
const (
	RetryFirst = time.Minute
	RetryMax   = 30 * time.Minute
)

// changeKey names a change: its kind, its job or node, and the limit or
// Nice it sets (a different value is another change). A comment's text
// and a hold's end are not part of it: they move every cycle.
type changeKey struct {
	kind      ActionKind
	job, node string
	limit     time.Duration
	nice      int
}

func keyOf(a Action) changeKey {
	k := changeKey{kind: a.Kind, job: a.Job, node: a.Node, limit: a.Limit}
	if a.Nice != nil {
		k.nice = *a.Nice
	}
	return k
}

// undoes says whether a change undoes one of Prescient's own.
func undoes(a Action) bool {
	switch a.Kind {
	case ActRestore, ActUnNice, ActRelease, ActPowerUp:
		return true
	}
	return false
}

// refusal is a change that failed fails times in a row, last at at.
type refusal struct {
	fails int
	at    time.Time
}

// retryAt is when the change may be tried again.
func (f refusal) retryAt() time.Time {
	wait := RetryMax
	if f.fails <= 6 { // RetryFirst << 5 is past RetryMax
		wait = min(RetryFirst<<(f.fails-1), RetryMax)
	}
	return f.at.Add(wait)
}

// holdBack leaves out of a cycle's changes those that failed and whose
// wait to be tried again has not passed at now, but for those that undo
// Prescient's own. Only cycles hold changes back.
func (r *Runner) holdBack(acts []Action, now time.Time) []Action {
	maps.DeleteFunc(r.refused, func(_ changeKey, f refusal) bool { // its job or node asks for no change now
		return now.Sub(f.at) > 2*RetryMax
	})
	kept := acts[:0]
	for _, a := range acts {
		f, ok := r.refused[keyOf(a)]
		if !ok || undoes(a) || !now.Before(f.retryAt()) {
			kept = append(kept, a)
			continue
		}
		r.Log.Debug("slurm: change held back after it failed", append(logAttrs(a), "failures", f.fails, "retry_at", f.retryAt())...)
	}
	return kept
}

// noteOutcome counts a change's failure in a row in the cycle of now, or
// forgets its failures once it is made.
func (r *Runner) noteOutcome(a Action, err error, t time.Time) {
	k := keyOf(a)
	if err == nil {
		delete(r.refused, k)
		return
	}
	if r.refused == nil {
		r.refused = map[changeKey]refusal{}
	}
	r.refused[k] = refusal{fails: r.refused[k].fails + 1, at: t}
}

// remember keeps in the state a change that was made at t.
func (r *Runner) remember(a Action, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch a.Kind {
	case ActLower:
		r.state.Lowered[a.Job] = Lowered{UserLimit: a.UserLimit, Set: a.Limit, At: t}
	case ActRestore:
		delete(r.state.Lowered, a.Job)
	case ActNice:
		r.state.Niced[a.Job] = Niced{UserNice: *a.UserNice, Set: *a.Nice, At: t}
	case ActUnNice:
		delete(r.state.Niced, a.Job)
	case ActHold:
		r.state.Held[a.Job] = a.Until
	case ActRelease:
		delete(r.state.Held, a.Job)
	case ActPowerDown:
		r.state.Parked[a.Node] = t
	}
}

func (r *Runner) record(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	if len(r.events) > maxEvents {
		r.events = r.events[len(r.events)-maxEvents:]
	}
	r.mu.Unlock()
	b, _ := json.Marshal(ev)
	if _, err := r.eventLog.Write(append(b, '\n')); err != nil {
		r.Log.Error("slurm: event not written", "err", err)
	}
}

func (r *Runner) load() error {
	if r.loaded {
		return nil
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if err := r.Config.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return fmt.Errorf("slurm: state folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(r.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("slurm: state folder: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("slurm: %s: %w", r.Dir, ErrLocked)
		}
		return fmt.Errorf("slurm: locking %s: %w", r.Dir, err)
	}
	r.state = State{}
	b, err := os.ReadFile(filepath.Join(r.Dir, "state.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("slurm: state: %w", err)
	default:
		if err := json.Unmarshal(b, &r.state); err != nil {
			return fmt.Errorf("slurm: state %s: %w", filepath.Join(r.Dir, "state.json"), err)
		}
	}
	f, err := os.OpenFile(filepath.Join(r.Dir, "events.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		lock.Close()
		return fmt.Errorf("slurm: events: %w", err)
	}
	r.eventLog, r.lock, r.loaded = f, lock, true
	r.state.init()
	return nil
}

func (r *Runner) save() error {
	r.mu.Lock()
	b, err := json.MarshalIndent(r.state, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := r.eventLog.Sync(); err != nil {
		return fmt.Errorf("slurm: events: %w", err)
	}
	return fsutil.WriteAtomic(filepath.Join(r.Dir, "state.json"), 0o600, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
