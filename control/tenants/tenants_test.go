package tenants

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAChangedFileAppliesAndABadOneKeepsTheLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	write(t, path, "tenants:\n  - {name: a, quota_gpus: 4}\n")
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts := f.Tenants(); len(ts) != 1 || ts[0].Quota[0].GPUs != 4 {
		t.Fatalf("tenants %+v", ts)
	}
	first := f.Status()
	applied := make(chan []cluster.Tenant, 4)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, time.Hour, hup, func(ts []cluster.Tenant) { applied <- ts }) }()
	defer func() { cancel(); <-done }()

	// SIGHUP reads it at once, though the period is an hour.
	write(t, path, "tenants:\n  - {name: a, quota_gpus: 8}\n  - {name: b}\n")
	hup <- os.Interrupt
	select {
	case ts := <-applied:
		if len(ts) != 2 || ts[0].Quota[0].GPUs != 8 {
			t.Errorf("applied %+v", ts)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reload on the signal applied nothing")
	}
	if st := f.Status(); st.SHA256 == first.SHA256 || st.LastError != "" {
		t.Errorf("status after the change: %+v (before: %+v)", st, first)
	}

	// A bad file: an error with its line, the last good tenants stay.
	write(t, path, "tenants:\n  - {name: a, quota_gpus: 8}\n  - {name: a}\n")
	if changed, err := f.Reload(); err == nil || changed || !strings.Contains(err.Error(), path+":3") {
		t.Errorf("a duplicate tenant: changed %v, %v", changed, err)
	}
	if ts := f.Tenants(); len(ts) != 2 || ts[1].Name != "b" {
		t.Errorf("after a bad file the tenants are %+v, want the last good", ts)
	}
	if st := f.Status(); !strings.Contains(st.LastError, ":3") || st.ErrorAt.IsZero() {
		t.Errorf("status after a bad file: %+v", st)
	}
	// Unchanged content is no change.
	write(t, path, "tenants:\n  - {name: a, quota_gpus: 8}\n  - {name: b}\n")
	if changed, err := f.Reload(); err != nil || changed {
		t.Errorf("the same tenants again: changed %v, %v", changed, err)
	}
	if f.Status().LastError != "" {
		t.Error("a good read left the last error in the status")
	}
}

func TestOpenRefusesAMissingOrBadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "none.yaml"), nil); err == nil {
		t.Error("opened a missing file")
	}
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, "tenants:\n  - {name: a, weight: -1}\n")
	if _, err := Open(bad, nil); err == nil || !strings.Contains(err.Error(), "bad.yaml:2") {
		t.Errorf("a negative weight: %v", err)
	}
}
