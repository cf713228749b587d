package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
)

func TestOpenAppliesMigrationsOnce(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s, path := openTest(t, WithLogger(logger))
	mustSubmit(t, s, testJob("j1").Obj())
	if !strings.Contains(logs.String(), "component=store") || !strings.Contains(logs.String(), "schema migration applied") {
		t.Errorf("logs lack the migration or the component:\n%s", logs.String())
	}
	latest, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if n := count(t, s2, "SELECT COUNT(*) FROM schema_migrations"); n != len(latest) {
			t.Errorf("%d migrations recorded, want %d", n, len(latest))
		}
		if _, err := s2.GetJob(ctx, "j1"); err != nil {
			t.Errorf("job lost on reopen: %v", err)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenSetsDurabilityPragmas(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "5000"} {
		var got string
		if err := s.w.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	_, err := s.w.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_time) VALUES (999, 'from_the_future', 0)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "999") {
		t.Fatalf("Open of a version-999 database: %v, want ErrSchemaTooNew naming the version", err)
	}
	t.Logf("error: %v", err)
}

func TestOpenRejectsNamesThatAreNotFiles(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db?mode=memory"} {
		if s, err := Open(context.Background(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

func TestOpenHandlesPathsWithURICharacters(t *testing.T) {
	path := t.TempDir() + "/odd name?#%.db"
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustSubmit(t, s, testJob("j1").Obj())
	if _, err := s.GetJob(context.Background(), cluster.JobID("j1")); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedMigrationsAreNumberedWithoutGaps(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("migrations = %+v, want versions from 1", ms)
	}
}

func TestPingAnswersWhileOpenAndFailsAfterClose(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping on an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("Ping on a closed store succeeded")
	}
}
