package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/prescient-sched/prescient/cluster"
)

// Submission is one new job for Submit: the job, what it runs (may be
// empty) and, when known, its forecast.
type Submission struct {
	Job      cluster.Job
	Run      RunSpec
	Forecast *JobForecast
}

// SubmitJob stores a new job together with its submitted event, both or
// neither. The job must be queued and pass job.Validate; a job whose ID is
// stored already gives an error wrapping ErrExists. When SubmitJob returns
// nil the job is on disk.
func (s *Store) SubmitJob(ctx context.Context, job cluster.Job) error {
	return s.Submit(ctx, Submission{Job: job})
}

// SubmitJobWithRun stores a new job, its submitted event and what it runs,
// all or nothing, as SubmitJob.
func (s *Store) SubmitJobWithRun(ctx context.Context, job cluster.Job, run RunSpec) error {
	return s.Submit(ctx, Submission{Job: job, Run: run})
}

// Submit stores a new job with its submitted event, its webhook
// deliveries, what it runs and its forecast, all or nothing, as SubmitJob.
//
// Submissions that arrive while a commit is under way wait for it and go
// into the next transaction together (group commit), each in a savepoint
// of its own so that one refused leaves the others stored: N concurrent
// submissions cost one fsync instead of N. A call whose ctx ends first
// returns its error; its job may still be stored.
func (s *Store) Submit(ctx context.Context, sub Submission) error {
	if err := s.submit(ctx, sub); err != nil {
		return fmt.Errorf("store: submit job %s: %w", sub.Job.ID, err)
	}
	return nil
}

func (s *Store) submit(ctx context.Context, sub Submission) error {
	job := sub.Job
	if job.State != cluster.StateQueued {
		return fmt.Errorf("state is %q, a new job must be %s", job.State, cluster.StateQueued)
	}
	if err := job.Validate(); err != nil {
		return fmt.Errorf("invalid job: %w", err)
	}
	if len(sub.Run.Command) == 0 && len(sub.Run.Env) > 0 {
		return errors.New("env without a command")
	}
	if f := sub.Forecast; f != nil && f.Job != job.ID {
		return fmt.Errorf("forecast of job %s", f.Job)
	}
	row, err := encodeJob(job)
	if err != nil {
		return err
	}
	p := &pendingSubmit{ctx: ctx, sub: &sub, row: &row, done: make(chan struct{})}
	s.group.add(s, p)
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// maxGroup bounds the submissions of one transaction.
const maxGroup = 256

// groupCommit gathers the submissions waiting for a transaction. One
// goroutine at a time leads: it commits what is waiting, then hands the
// lead to a new goroutine if more came meanwhile, and returns.
type groupCommit struct {
	mu      sync.Mutex
	waiting []*pendingSubmit
	leading bool
}

// pendingSubmit is a submission waiting for its transaction; err is set
// before done is closed.
type pendingSubmit struct {
	ctx  context.Context
	sub  *Submission
	row  *jobRow
	err  error
	done chan struct{}
}

// add queues p, and leads if no one does.
func (g *groupCommit) add(s *Store, p *pendingSubmit) {
	g.mu.Lock()
	g.waiting = append(g.waiting, p)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		g.lead(s)
	}
}

// lead commits one group and passes the lead on.
func (g *groupCommit) lead(s *Store) {
	g.mu.Lock()
	n := min(len(g.waiting), maxGroup)
	batch := g.waiting[:n:n]
	g.waiting = g.waiting[n:]
	g.mu.Unlock()
	s.commitGroup(batch)
	g.mu.Lock()
	more := len(g.waiting) > 0
	g.leading = more
	g.mu.Unlock()
	if more {
		go g.lead(s)
	}
}

// commitGroup stores the batch in one transaction, each submission in a
// savepoint, and tells each its outcome.
func (s *Store) commitGroup(batch []*pendingSubmit) {
	ctx := context.Background() // the group outlives any one caller's request
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		fw := s.forecastWriter(tx) // one statement for the group's forecasts
		defer fw.close()
		if len(batch) == 1 { // the transaction is its savepoint
			p := batch[0]
			if p.err = context.Cause(p.ctx); p.err == nil {
				p.err = s.insertSubmission(ctx, tx, fw, p)
			}
			return p.err
		}
		for _, p := range batch {
			if err := p.ctx.Err(); err != nil {
				p.err = context.Cause(p.ctx)
				continue
			}
			if _, err := tx.ExecContext(ctx, "SAVEPOINT submit"); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			p.err = s.insertSubmission(ctx, tx, fw, p)
			if p.err != nil {
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO submit"); err != nil {
					return fmt.Errorf("roll back to the savepoint: %w", err)
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE submit"); err != nil {
				return fmt.Errorf("release the savepoint: %w", err)
			}
		}
		return nil
	})
	for _, p := range batch {
		if err != nil && p.err == nil {
			p.err = err
		}
		close(p.done)
	}
}

// insertSubmission writes one submission in tx, its forecast with fw.
func (s *Store) insertSubmission(ctx context.Context, tx *sql.Tx, fw *forecastWriter, p *pendingSubmit) error {
	job := &p.sub.Job
	if err := insertJob(ctx, tx, p.row); err != nil {
		return err
	}
	ev := Event{JobID: job.ID, Time: job.SubmitTime, Type: EventSubmitted, To: cluster.StateQueued}
	if err := insertEvent(ctx, tx, &ev); err != nil {
		return err
	}
	if err := s.addEventDeliveries(ctx, tx, *job, ev); err != nil {
		return err
	}
	if err := insertRun(ctx, tx, job.ID, p.sub.Run); err != nil {
		return err
	}
	if f := p.sub.Forecast; f != nil {
		if err := fw.put(ctx, *f); err != nil {
			return fmt.Errorf("forecast: %w", err)
		}
	}
	return nil
}
