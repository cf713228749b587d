package sim

import (
	"container/heap"
	"time"
)

// eventKind says what happens at an event.
type eventKind int

const (
	evFinish   eventKind = iota // a job's work is done
	evStop                      // a preempted job's checkpoint landed or its grace ran out
	evFail                      // a node fails
	evRepair                    // a failed node is back
	evWake                      // the planner asked to be called again
	evLend                      // a minute of the inference pool (lending.go)
	evParkDue                   // a node has been empty ParkIdleAfter (forecast parking reviews it)
	evWithdraw                  // a job the trace shows cancelled while it waited leaves the queue
)

// event is one entry of the event queue. Job events carry the job's epoch
// at scheduling time; a job's epoch moves on when it stops or restarts,
// which makes its older events stale.
type event struct {
	at    time.Time
	seq   uint64
	kind  eventKind
	job   *simJob
	epoch int
	node  int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// events is the simulator's event queue.
type events struct {
	h   eventHeap
	seq uint64
}

func (q *events) push(e event) {
	q.seq++
	e.seq = q.seq
	heap.Push(&q.h, e)
}

func (q *events) pop() event { return heap.Pop(&q.h).(event) }

func (q *events) len() int { return len(q.h) }

func (q *events) next() time.Time { return q.h[0].at }
