package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

func TestServeAnswersProbesAndShutsDownCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "p.db"), "--log-level", "warn"})
		done <- root.ExecuteContext(ctx)
	}()

	for _, path := range []string{"/healthz", "/readyz"} {
		if code := waitFor(t, "http://"+addr+path); code != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200", path, code)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after SIGTERM-like cancellation", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15 s of cancellation")
	}
}

func waitFor(t *testing.T, url string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			return res.StatusCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
