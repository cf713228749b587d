package agenthub

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/agent/protocol"
)

// registerSeeds are registrations, valid and not, for FuzzHubHandler.
var registerSeeds = []string{
	`{"node":{"name":"n1","gpus":[{"index":0,"model":"A100-SXM4-40GB","memory_bytes":42949672960}],"rack":"r1"},"instance":"abc","running":[{"job":"j1","attempt":1,"rank":0,"world_size":1}]}`,
	`{"node":{"name":"n 1"},"instance":"i"}`,
	`{"node":{"name":"n1"},"instance":"i"} trailing`,
}

// FuzzHubHandler sends arbitrary bodies to the hub's routes: never a 5xx,
// never a panic, always the error shape on failure.
func FuzzHubHandler(f *testing.F) {
	for _, s := range registerSeeds {
		f.Add("POST", protocol.PathRegister, []byte(s))
	}
	f.Add("POST", "/v1/agents/n1/events", []byte(`{"instance":"i","events":[]}`))
	// Another node's word on j1's attempt 1, which the record places on n1.
	f.Add("POST", "/v1/agents/n2/events", []byte(`{"instance":"i","events":[{"seq":1,"type":"exited","time":"2026-01-01T00:00:00Z","job":"j1","attempt":1,"rank":0,"world_size":1,"exit_code":1}]}`))
	f.Add("POST", protocol.PathRegister, []byte(`{"node":{"name":"n2"},"instance":"i","running":[{"job":"j1","attempt":1,"rank":0,"world_size":1}]}`))
	f.Add("GET", "/v1/agents/n1/commands?after=x", []byte(nil))
	f.Add("GET", "/v1/agents/n1/commands?after=0&wait_s=0&session=s", []byte(nil))
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if method != "GET" && method != "POST" || !strings.HasPrefix(path, "/v1/agents/") || strings.ContainsAny(path, " \r\n#%") {
			return
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return // not a request the server would hand the handler
		}
		h := NewHub(HubOptions{PollWait: 1, Placement: func(job string, attempt int) ([]string, bool) {
			return []string{"n1"}, job == "j1" && attempt == 1
		}}).Handler()
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
