package executor_test

import (
	"testing"

	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/policies"
)

func mustPolicy(t testing.TB, name string) *executor.Framework {
	t.Helper()
	pol, err := policies.New(name, policies.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := executor.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
