package agent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
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
		r, err := DecodeRegister(b)
		if err != nil {
			return
		}
		// What is accepted is valid and can be turned into the domain's node.
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid request: %v", err)
		}
		n := r.Node.clusterNode()
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
		r, err := DecodeEvents(b)
		if err != nil {
			return
		}
		for _, e := range r.Events {
			if e.Type == EventCheckpointed && e.Checkpoint == nil {
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
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeCommands(b)
		if err != nil {
			return
		}
		for _, c := range r.Commands {
			if c.Type == CommandStart {
				if c.Start == nil || len(c.Start.Command) == 0 {
					t.Fatalf("accepted a start without a command: %+v", c)
				}
				for k := range c.Start.Env {
					if strings.HasPrefix(k, "PRESCIENT_") || k == "CUDA_VISIBLE_DEVICES" {
						t.Fatalf("accepted a job setting %s", k)
					}
				}
				if _, err := ParseSignal(c.Start.CheckpointSignal); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzParseAck(f *testing.F) {
	for _, s := range []string{`{"step": 120, "path": "/ckpt/120"}`, "120 /ckpt/120\n", "x /p", "-1 /p", "12", `{"step":1}`, "", "1 a\nb", `{"step":1,"path":"p","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAck(b)
		if err != nil {
			return
		}
		if a.Step < 0 || a.Path == "" {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (work load) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 100000 200 18446744073709551615\n"))
	f.Add([]byte("1 ((sd-pam)) S 0 1 1\n"))
	f.Add([]byte("no parens"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseProcStat(b) // must not panic
	})
}

// FuzzHubHandler sends arbitrary bodies to the hub's routes: never a 5xx,
// never a panic, always the error shape on failure.
func FuzzHubHandler(f *testing.F) {
	for _, s := range registerSeeds {
		f.Add("POST", PathRegister, []byte(s))
	}
	f.Add("POST", "/v1/agents/n1/events", []byte(`{"instance":"i","events":[]}`))
	f.Add("GET", "/v1/agents/n1/commands?after=x", []byte(nil))
	f.Add("GET", "/v1/agents/n1/commands?after=0&wait_s=0&session=s", []byte(nil))
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if method != "GET" && method != "POST" || !strings.HasPrefix(path, "/v1/agents/") || strings.ContainsAny(path, " \r\n#%") {
			return
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return // not a request the server would hand the handler
		}
		h := NewHub(HubOptions{PollWait: 1}).Handler()
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Code != http.StatusMethodNotAllowed && !strings.Contains(w.Body.String(), `"error"`) {
			t.Fatalf("%s %s: %d without the error shape: %s", method, path, w.Code, w.Body)
		}
	})
}
