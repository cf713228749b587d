package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prescient-sched/prescient/cluster"
)

// RunSpec is what a node agent runs for a job.
type RunSpec struct {
	Command []string
	Env     map[string]string
}

func insertRun(ctx context.Context, tx *sql.Tx, id cluster.JobID, run RunSpec) error {
	if len(run.Command) == 0 {
		return nil
	}
	cmd, err := marshal(run.Command)
	if err != nil {
		return err
	}
	var env sql.NullString
	if len(run.Env) > 0 {
		text, err := marshal(run.Env)
		if err != nil {
			return err
		}
		env = sql.NullString{String: text, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO job_runs (job_id, command, env) VALUES (?, ?, ?)", string(id), cmd, env); err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

// GetRun returns what a job runs; a job submitted without a command gives
// an empty RunSpec.
func (s *Store) GetRun(ctx context.Context, id cluster.JobID) (RunSpec, error) {
	var cmd string
	var env sql.NullString
	err := s.r.QueryRowContext(ctx, "SELECT command, env FROM job_runs WHERE job_id = ?", string(id)).Scan(&cmd, &env)
	if errors.Is(err, sql.ErrNoRows) {
		return RunSpec{}, nil
	}
	var run RunSpec
	if err == nil {
		err = json.Unmarshal([]byte(cmd), &run.Command)
	}
	if err == nil && env.Valid {
		err = json.Unmarshal([]byte(env.String), &run.Env)
	}
	if err != nil {
		return RunSpec{}, fmt.Errorf("store: run of %s: %w", id, err)
	}
	return run, nil
}
