package protocol_test

import (
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/agent/protocol"
)

var registerSeeds = []string{
	`{"node":{"name":"n1","gpus":[{"index":0,"model":"A100-SXM4-40GB","memory_bytes":42949672960}],"rack":"r1"},"instance":"abc","running":[{"job":"j1","attempt":1,"rank":0,"world_size":1}]}`,
	`{"node":{"name":"n1","gpus":[]},"instance":"i","running":[],"events":[{"seq":1,"type":"exited","time":"2026-01-01T00:00:00Z","job":"j","attempt":1,"rank":0,"world_size":1,"exit_code":3}]}`,
	`{"node":{"name":"n 1"},"instance":"i"}`,
	`{"node":{"name":"n1","gpus":[{"index":0,"model":"x"},{"index":0,"model":"x"}]},"instance":"i"}`,
	`{"node":{"name":"n1"},"instance":"i","bogus":1}`,
	`{"node":{"name":"n1"},"instance":"i"} trailing`,
	`[]`, ``, `{"node":{"name":"n1","gpus":[{"index":-1,"model":"x"}]},"instance":"i"}`,
}

func FuzzDecodeRegister(f *testing.F) {
	for _, s := range registerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeRegister(b)
		if err != nil {
			return
		}
		// What is accepted is valid and can be turned into the domain's node.
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid request: %v", err)
		}
		n := r.Node.ClusterNode()
		if len(n.GPUs) != len(r.Node.GPUs) || n.Name == "" {
			t.Fatalf("node %+v from %+v", n, r.Node)
		}
	})
}

func FuzzDecodeEvents(f *testing.F) {
	f.Add([]byte(`{"instance":"i","events":[{"seq":1,"type":"checkpointed","time":"2026-01-01T00:00:00Z","job":"j","attempt":1,"rank":0,"world_size":1,"exit_code":0,"checkpoint":{"time":"2026-01-01T00:00:00Z","step":10,"path":"/c/10"}}]}`))
	f.Add([]byte(`{"instance":"i","events":[{"seq":1,"type":"checkpointed","time":"2026-01-01T00:00:00Z","job":"j","attempt":1,"rank":0,"world_size":1,"exit_code":0}]}`))
	f.Add([]byte(`{"instance":"i","events":[{"seq":0,"type":"started","time":"2026-01-01T00:00:00Z","job":"j","attempt":1,"rank":2,"world_size":1,"exit_code":0}]}`))
	f.Add([]byte(`{"instance":"i","events":[{"seq":1,"type":"boom"}]}`))
	f.Add([]byte(`{"instance":"","events":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeEvents(b)
		if err != nil {
			return
		}
		for _, e := range r.Events {
			if e.Type == protocol.EventCheckpointed && e.Checkpoint == nil {
				t.Fatal("accepted a checkpointed event without its checkpoint")
			}
			if e.Seq <= 0 || e.Rank >= e.WorldSize {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}

func FuzzDecodeCommands(f *testing.F) {
	f.Add([]byte(`{"commands":[{"seq":1,"type":"start","job":"j","attempt":1,"start":{"gpus":[2,3],"command":["/bin/true"],"env":{"A":"b"},"rank":0,"world_size":1,"checkpoint_signal":"SIGUSR2","checkpoint_every_s":600}}]}`))
	f.Add([]byte(`{"commands":[{"seq":2,"type":"stop","job":"j","attempt":1,"grace_s":30},{"seq":3,"type":"checkpoint","job":"j","attempt":1}]}`))
	f.Add([]byte(`{"commands":[{"seq":1,"type":"start","job":"j","attempt":1,"start":{"gpus":[1,1],"command":["x"],"rank":0,"world_size":1}}]}`))
	f.Add([]byte(`{"commands":[{"seq":1,"type":"start","job":"j","attempt":1,"start":{"gpus":[0],"command":["x"],"env":{"PRESCIENT_JOB_ID":"other"},"rank":0,"world_size":1}}]}`))
	f.Add([]byte(`{"commands":[{"seq":1,"type":"stop","job":"j","attempt":1,"grace_s":-1}]}`))
	f.Add([]byte(`{"commands":[{"seq":4,"type":"log","job":"j","attempt":2,"log":{"id":"r1","max_bytes":65536}}]}`))
	f.Add([]byte(`{"commands":[{"seq":4,"type":"log","job":"j","attempt":2,"log":{"id":"","max_bytes":0}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeCommands(b)
		if err != nil {
			return
		}
		for _, c := range r.Commands {
			if c.Type == protocol.CommandLog && (c.Log == nil || c.Log.ID == "" || c.Log.MaxBytes < 1 || c.Log.MaxBytes > protocol.MaxLogBytes) {
				t.Fatalf("accepted a log command asking for %+v", c.Log)
			}
			if c.Type == protocol.CommandStart {
				if c.Start == nil || len(c.Start.Command) == 0 {
					t.Fatalf("accepted a start without a command: %+v", c)
				}
				for k := range c.Start.Env {
					if strings.HasPrefix(k, "PRESCIENT_") || k == "CUDA_VISIBLE_DEVICES" {
						t.Fatalf("accepted a job setting %s", k)
					}
				}
				if _, err := protocol.ParseSignal(c.Start.CheckpointSignal); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzDecodeLogReply(f *testing.F) {
	f.Add([]byte(`{"id":"r1","text":"step 10\n","truncated":true}`))
	f.Add([]byte(`{"id":"r1","text":"","error":"no log of job j attempt 2 on this node"}`))
	f.Add([]byte(`{"id":"a b","text":"x"}`))
	f.Add([]byte(`{"ID":"r1","text":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := protocol.DecodeLogReply(b)
		if err != nil {
			return
		}
		if protocol.CheckID("id", r.ID) != nil {
			t.Fatalf("accepted the ID %q", r.ID)
		}
	})
}

func FuzzParseAck(f *testing.F) {
	for _, s := range []string{`{"step": 120, "path": "/ckpt/120"}`, "120 /ckpt/120\n", "x /p", "-1 /p", "12", `{"step":1}`, "", "1 a\nb", `{"step":1,"path":"p","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := protocol.ParseAck(b)
		if err != nil {
			return
		}
		if a.Step < 0 || a.Path == "" {
			t.Fatalf("accepted %+v", a)
		}
	})
}
