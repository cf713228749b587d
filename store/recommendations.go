package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// RecommendationStatus is where a recommendation stands.
type RecommendationStatus string

// The recommendation statuses.
const (
	RecommendationOpen      RecommendationStatus = "open"      // not acted on yet
	RecommendationApplied   RecommendationStatus = "applied"   // an operator or autopilot acted on it
	RecommendationDismissed RecommendationStatus = "dismissed" // rejected or overtaken by events
)

// Valid reports whether s is a defined status.
func (s RecommendationStatus) Valid() bool {
	return s == RecommendationOpen || s == RecommendationApplied || s == RecommendationDismissed
}

// Recommendation is something the advisor recommends, with its reason.
type Recommendation struct {
	// ID is set by the store.
	ID int64
	// Time is when it was made; the zero time means now by the Store's clock.
	Time time.Time
	// JobID is the job it is about, if it is about one; the job must be stored.
	JobID cluster.JobID
	// Kind says what is recommended, in the advisor's words: "preempt",
	// "place", "power_cap", ...
	Kind string
	// Reason says why, for people.
	Reason string
	// Details is JSON: the plan behind it, the forecasts it used; nil for none.
	Details json.RawMessage
	// Status is empty (meaning open) or a defined status.
	Status RecommendationStatus
}

// validate checks what the caller filled in.
func (r *Recommendation) validate() error {
	var errs []error
	if r.Kind == "" {
		errs = append(errs, errors.New("kind: empty"))
	}
	if r.Reason == "" {
		errs = append(errs, errors.New("reason: empty"))
	}
	if len(r.Details) > 0 && !json.Valid(r.Details) {
		errs = append(errs, errors.New("details: not valid JSON"))
	}
	if r.Status != "" && !r.Status.Valid() {
		errs = append(errs, fmt.Errorf("status: %q is not a recommendation status", r.Status))
	}
	return errors.Join(errs...)
}

// AddRecommendation stores a recommendation and returns its ID. One about a
// job that is not stored gives an error wrapping ErrNotFound.
func (s *Store) AddRecommendation(ctx context.Context, r Recommendation) (int64, error) {
	id, err := s.addRecommendation(ctx, r)
	if err != nil {
		return 0, fmt.Errorf("store: add %s recommendation: %w", r.Kind, err)
	}
	return id, nil
}

func (s *Store) addRecommendation(ctx context.Context, r Recommendation) (int64, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	if r.Time.IsZero() {
		r.Time = s.clock()
	}
	if r.Status == "" {
		r.Status = RecommendationOpen
	}
	t, err := unixNanos(r.Time)
	if err != nil {
		return 0, fmt.Errorf("time: %w", err)
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO recommendations (time, job_id, kind, reason, details, status)
		VALUES (?, ?, ?, ?, ?, ?)`, t, sql.NullString{String: string(r.JobID), Valid: r.JobID != ""},
		r.Kind, r.Reason, sql.NullString{String: string(r.Details), Valid: len(r.Details) > 0}, string(r.Status))
	if isForeignKeyViolation(err) {
		return 0, fmt.Errorf("job %s: %w", r.JobID, ErrNotFound)
	}
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// ListRecommendations returns the recommendations made at or after since,
// oldest first, at most limit of them (0 means DefaultLimit).
func (s *Store) ListRecommendations(ctx context.Context, since time.Time, limit int) ([]Recommendation, error) {
	recs, err := s.listRecommendations(ctx, since, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list recommendations: %w", err)
	}
	return recs, nil
}

func (s *Store) listRecommendations(ctx context.Context, since time.Time, limit int) ([]Recommendation, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	from := int64(math.MinInt64)
	if !since.IsZero() {
		if from, err = unixNanos(since); err != nil {
			return nil, fmt.Errorf("since: %w", err)
		}
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, time, job_id, kind, reason, details, status
		FROM recommendations WHERE time >= ? ORDER BY time, id LIMIT ?`, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []Recommendation
	for rows.Next() {
		r, err := scanRecommendation(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

func scanRecommendation(sc scanner) (Recommendation, error) {
	var (
		r            Recommendation
		t            int64
		job, details sql.NullString
	)
	if err := sc.Scan(&r.ID, &t, &job, &r.Kind, &r.Reason, &details, &r.Status); err != nil {
		return Recommendation{}, err
	}
	r.Time, r.JobID = fromNanos(t), cluster.JobID(job.String)
	if details.Valid {
		r.Details = json.RawMessage(details.String)
	}
	return r, nil
}

// SetRecommendationStatus changes the status of a recommendation: applied
// when someone acted on it, dismissed when it was rejected or overtaken by
// events. One that is not stored gives an error wrapping ErrNotFound.
func (s *Store) SetRecommendationStatus(ctx context.Context, id int64, st RecommendationStatus) error {
	err := s.setRecommendationStatus(ctx, id, st)
	if err != nil {
		return fmt.Errorf("store: set status of recommendation %d: %w", id, err)
	}
	return nil
}

func (s *Store) setRecommendationStatus(ctx context.Context, id int64, st RecommendationStatus) error {
	if !st.Valid() {
		return fmt.Errorf("status %q is not a recommendation status", st)
	}
	res, err := s.w.ExecContext(ctx, "UPDATE recommendations SET status = ? WHERE id = ?", string(st), id)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
