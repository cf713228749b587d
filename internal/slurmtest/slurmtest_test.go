package slurmtest_test

import (
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/internal/slurmtest"
)

func TestClusterRunsAJobWithGPUs(t *testing.T) {
	c := slurmtest.Start(t)
	id := c.Sbatch(t, "-J", "probe", "-t", "5", "--gres=gpu:2", "--hold", "--wrap", "true")
	out := c.Run(t, "squeue", "-h", "-j", id, "-o", "%i %l %b %T")
	if got, want := strings.TrimSpace(out), id+" 5:00 gres:gpu:2 PENDING"; got != want {
		t.Fatalf("squeue: %q", out)
	}
}
