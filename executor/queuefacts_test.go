package executor_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
)

// A QueueFactsKeeper told of every job that joins and leaves a queue, as
// the clock moves on, has the facts a walk of the queue finds: whether a
// job fits in no whole GPU, the fewest GPUs a plain job asks for, and the
// jobs first queued now.
func TestQueueFactsKeeperAgreesWithAWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var k executor.QueueFactsKeeper
		var queue []*executor.JobView
		now := clustertest.Epoch
		for step := range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); {
			case op == 0:
				now = now.Add(time.Duration(rapid.IntRange(1, 600).Draw(rt, "gap_s")) * time.Second)
			case op <= 3 || len(queue) == 0:
				w := clustertest.Job(fmt.Sprintf("j%03d", step)).Submitted(now)
				switch rapid.IntRange(0, 4).Draw(rt, "kind") {
				case 0:
					w.Share(rapid.IntRange(100, 900).Draw(rt, "milli"))
				case 1:
					w.GPUs(0)
				case 2:
					w.GPUs(8).Gang(2)
				default:
					w.GPUs(rapid.IntRange(1, 16).Draw(rt, "gpus"))
				}
				j := w.Obj()
				j.Attempts = rapid.IntRange(0, 1).Draw(rt, "attempts") // a requeued job is not new
				v := &executor.JobView{Job: &j, QueuedSince: now}
				queue = append(queue, v)
				k.Add(v, now)
			default:
				i := rapid.IntRange(0, len(queue)-1).Draw(rt, "leaves")
				k.Remove(queue[i])
				queue = slices.Delete(queue, i, i+1)
			}
			walked, kept := executor.QueueFactsOf(queue, now), k.Facts(now)
			if !kept.Same(&walked) {
				rt.Fatalf("step %d: kept %+v, walked %+v", step, *kept, walked)
			}
		}
	})
}
