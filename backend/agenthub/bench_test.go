package agenthub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// benchHub is a hub with 128 registered 8-GPU nodes (a 1,024-GPU fleet).
func benchHub(b *testing.B) *Hub {
	h := NewHub(HubOptions{PollWait: time.Millisecond, MaxEvents: 1 << 30})
	for i := range 128 {
		n := protocol.NodeInfo{Name: fmt.Sprintf("node-%03d", i)}
		for g := range 8 {
			n.GPUs = append(n.GPUs, protocol.GPUInfo{Index: g, Model: "A100-SXM4-80GB", MemoryBytes: 80 << 30})
		}
		h.register(protocol.RegisterRequest{Node: n, Instance: "i"})
	}
	return h
}

// BenchmarkHubStart: one Start of an 8-GPU job on one node of the fleet,
// each a new (job, attempt).
func BenchmarkHubStart(b *testing.B) {
	h := benchHub(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		node := fmt.Sprintf("node-%03d", i%128)
		a := executor.Assignment{Job: cluster.Job{ID: cluster.JobID(fmt.Sprintf("j%d", i))}, Attempt: 1, Command: []string{"/bin/true"}}
		for g := range 8 {
			a.Allocations = append(a.Allocations, cluster.Allocation{GPU: cluster.GPURef{Node: node, Index: g}, Milli: 1000})
		}
		if err := h.Start(ctx, a); err != nil {
			b.Fatal(err)
		}
		if i%128 == 127 { // the agents acknowledge their commands
			h.mu.Lock()
			for _, n := range h.nodes {
				n.cmds = n.cmds[:0]
			}
			h.mu.Unlock()
		}
	}
}

// BenchmarkHubEventsPost: one agent's POST of 99 events through the HTTP
// handler: 33 jobs each started, checkpointed and exited.
func BenchmarkHubEventsPost(b *testing.B) {
	h := benchHub(b)
	handler := h.Handler()
	now := time.Now().UTC()
	seq := int64(0)
	body := func() []byte {
		req := protocol.EventsRequest{Instance: "i"}
		for k := range 99 {
			seq++
			e := protocol.Event{Seq: seq, Time: now, Job: fmt.Sprintf("j%d", (seq-1)/3), Attempt: 1, WorldSize: 1}
			switch k % 3 {
			case 0:
				e.Type = protocol.EventStarted
			case 1:
				e.Type, e.Checkpoint = protocol.EventCheckpointed, &protocol.CheckpointInfo{Time: now, Step: 10, Path: "/ckpt/10"}
			case 2:
				e.Type, e.ExitCode = protocol.EventExited, 0
			}
			req.Events = append(req.Events, e)
		}
		b, _ := json.Marshal(req)
		return b
	}
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = body()
	}
	b.ResetTimer()
	for i := range b.N {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/agents/node-001/events", bytes.NewReader(bodies[i])))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(99*b.N)/b.Elapsed().Seconds(), "events/s")
}
