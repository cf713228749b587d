package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func TestSubmitJobWithRunStoresTheCommand(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	run := RunSpec{Command: []string{"prescient", "workload", "--steps", "100"}, Env: map[string]string{"SEED": "7"}}
	if err := s.SubmitJobWithRun(ctx, testJob("j1").Obj(), run); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(ctx, "j1")
	if err != nil || !reflect.DeepEqual(got, run) {
		t.Errorf("GetRun = %+v, %v; want %+v", got, err, run)
	}
	if err := s.SubmitJobWithRun(ctx, testJob("j2").Obj(), RunSpec{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRun(ctx, "j2"); err != nil || len(got.Command) != 0 {
		t.Errorf("run of a job without one: %+v, %v", got, err)
	}
	// A duplicate ID stores neither the job nor the run.
	err = s.SubmitJobWithRun(ctx, testJob("j1").Obj(), RunSpec{Command: []string{"other"}})
	if !errors.Is(err, ErrExists) {
		t.Errorf("duplicate: %v, want ErrExists", err)
	}
	if got, _ := s.GetRun(ctx, "j1"); got.Command[0] != "prescient" {
		t.Errorf("run replaced by a refused submission: %+v", got)
	}
	if err := s.SubmitJobWithRun(ctx, testJob("j3").Obj(), RunSpec{Env: map[string]string{"A": "b"}}); err == nil {
		t.Error("env without a command: no error")
	}
}
