package agent

import (
	"sync"

	"github.com/prescient-sched/prescient/agent/protocol"
)

// outbox holds the events not yet delivered, in order, numbered. It is
// bounded: when full, the oldest event is dropped and counted.
type outbox struct {
	mu      sync.Mutex
	events  []protocol.Event
	nextSeq int64
	max     int
	dropped int64
	notify  chan struct{}
}

func newOutbox(max int) *outbox {
	return &outbox{max: max, nextSeq: 1, notify: make(chan struct{}, 1)}
}

// add numbers e and queues it; it reports whether an old event was dropped.
func (o *outbox) add(e protocol.Event) (dropped bool) {
	o.mu.Lock()
	e.Seq = o.nextSeq
	o.nextSeq++
	o.events = append(o.events, e)
	if len(o.events) > o.max {
		o.events = o.events[1:]
		o.dropped++
		dropped = true
	}
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return dropped
}

// pending returns up to n of the oldest events.
func (o *outbox) pending(n int) []protocol.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]protocol.Event(nil), o.events[:min(n, len(o.events))]...)
}

// delivered removes the events numbered up to seq.
func (o *outbox) delivered(seq int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.events) && o.events[i].Seq <= seq {
		i++
	}
	o.events = o.events[i:]
}

// len is the number of events waiting.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.events)
}
