package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
)

// rawRequest writes head (a request's line and headers) on a new
// connection, then one byte of body every trickle (none when trickle is
// 0), and returns the answer's status line and how long the server took
// to answer and close the connection, or the error that ended it.
func rawRequest(t *testing.T, addr, head string, trickle time.Duration) (string, time.Duration, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	if trickle > 0 {
		go func() {
			for range time.Tick(trickle) {
				if _, err := conn.Write([]byte("{")); err != nil {
					return
				}
			}
		}()
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err == nil && !strings.HasPrefix(head, "GET") {
		// nil once the server closed it; a reset when it closed while the
		// trickle still wrote.
		if _, err = io.Copy(io.Discard, rd); errors.Is(err, syscall.ECONNRESET) {
			err = nil
		}
	}
	return strings.TrimSpace(line), time.Since(began), err
}

func TestASlowOrMissingBodyIsCutOff(t *testing.T) {
	polled := make(chan error, 1)
	e := newEnv(t, func(c *api.Config) {
		c.BodyTimeout = time.Second
		c.Agents = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // a long poll, longer than the body's bound
			case <-time.After(2 * time.Second):
				polled <- nil
			case <-r.Context().Done():
				polled <- r.Context().Err()
			}
			w.WriteHeader(http.StatusOK)
		})
	})
	srv := httptest.NewServer(e.srv.Handler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	post := func(token string) string {
		h := "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
		if token != "" {
			h += "Authorization: Bearer " + token + "\r\n"
		}
		return h + "\r\n"
	}
	for name, tc := range map[string]struct {
		head       string
		trickle    time.Duration
		wantStatus string
		within     time.Duration
	}{
		"no token, a body declared and never sent": {post(""), 0, "401", 500 * time.Millisecond},
		"a token, a body never sent":               {post(tokSubmitterA), 0, "400", 3 * time.Second},
		"a token, a body trickled":                 {post(tokSubmitterA), 100 * time.Millisecond, "400", 3 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			line, took, err := rawRequest(t, addr, tc.head, tc.trickle)
			if err != nil || !strings.Contains(line, " "+tc.wantStatus+" ") || took > tc.within {
				t.Errorf("answered %q (%v) after %s; want %s within %s", line, err, took.Round(time.Millisecond), tc.wantStatus, tc.within)
			}
		})
	}
	// A long poll outlives the body's bound.
	line, _, err := rawRequest(t, addr, fmt.Sprintf("GET /v1/agents/n1/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", tokAgent), 0)
	if err != nil || !strings.Contains(line, " 200 ") {
		t.Errorf("long poll answered %q (%v); want 200", line, err)
	}
	if err := <-polled; err != nil {
		t.Errorf("the long poll's context ended early: %v", err)
	}
}
