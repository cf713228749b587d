package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// The helper writer is this test binary run again with these variables set.
const (
	helperDBEnv     = "PRESCIENT_STORE_HELPER_DB"
	helperPrefixEnv = "PRESCIENT_STORE_HELPER_PREFIX"
)

// TestHelperWriter is not a test: it is the writer process that
// TestKilledWriterLosesNothingAcknowledged kills. It submits jobs in a loop
// and starts every second one, and prints "submitted ID" or "started ID"
// once the call has returned: a line on stdout is an acknowledgement.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv(helperDBEnv)
	if path == "" {
		t.Skip("the writer process of TestKilledWriterLosesNothingAcknowledged")
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	start := func(j *cluster.Job) (EventType, string, error) {
		return EventStarted, "", j.Transition(cluster.StateRunning, time.Now())
	}
	// The parent kills us long before this; the deadline only keeps an
	// orphan from writing forever.
	for i, end := 0, time.Now().Add(time.Minute); time.Now().Before(end); i++ {
		id := cluster.JobID(fmt.Sprintf("%s-%06d", os.Getenv(helperPrefixEnv), i))
		if err := s.SubmitJob(ctx, testJob(string(id)).Submitted(time.Now()).Obj()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("submitted", id)
		if i%2 == 1 {
			if _, err := s.UpdateJob(ctx, id, start); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Println("started", id)
		}
	}
	os.Exit(3)
}

// A writer killed with SIGKILL in the middle of its work leaves a database
// that holds every job it acknowledged, each with its events, and nothing
// half-written. Three rounds kill three writers on the same file, so each
// reopening also recovers from a killed writer's WAL.
func TestKilledWriterLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills writer processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := map[string][]cluster.JobID{}
	for round, n := range []int{1, 150, 400} {
		prefix := fmt.Sprintf("r%d", round)
		acks := killWriterAfter(t, path, prefix, n)
		for verb, ids := range acks {
			acked[verb] = append(acked[verb], ids...)
		}
		checkSurvivors(t, path, acked)
		checkAtMostOneUnacknowledged(t, path, prefix, len(acks["submitted"]))
	}
}

// killWriterAfter runs the helper writer, sends it SIGKILL once it has
// acknowledged n writes, and returns every write it acknowledged, by verb.
func killWriterAfter(t *testing.T, path, prefix string, n int) map[string][]cluster.JobID {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperPrefixEnv+"="+prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := map[string][]cluster.JobID{}
	lines, killed := bufio.NewScanner(stdout), false
	for lines.Scan() {
		if verb, id, ok := strings.Cut(lines.Text(), " "); ok {
			acks[verb] = append(acks[verb], cluster.JobID(id))
		}
		if !killed && len(acks["submitted"])+len(acks["started"]) >= n {
			killed = cmd.Process.Kill() == nil // SIGKILL; lines already written still count
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !killed || !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v before it was killed; stderr:\n%s", err, stderr.String())
	}
	t.Logf("writer %s killed after %d submits and %d starts", prefix, len(acks["submitted"]), len(acks["started"]))
	return acks
}

// checkSurvivors reopens the database and checks it holds every
// acknowledged write, passes SQLite's integrity check and holds no job
// without the events that explain its state.
func checkSurvivors(t *testing.T, path string, acked map[string][]cluster.JobID) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	checkIntegrity(t, s)
	for _, id := range acked["submitted"] {
		if events, err := s.Events(ctx, id); err != nil || events[0].Type != EventSubmitted {
			t.Errorf("acknowledged job %s: events %+v, %v", id, events, err)
		}
	}
	for _, id := range acked["started"] {
		if job, err := s.GetJob(ctx, id); err != nil || job.State != cluster.StateRunning || job.Attempts != 1 {
			t.Errorf("acknowledged start of %s lost: %+v, %v", id, job, err)
		}
	}
	for what, query := range map[string]string{
		"jobs without their submitted event": `SELECT COUNT(*) FROM jobs j WHERE NOT EXISTS
			(SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.type = 'submitted')`,
		"running jobs without their started event": `SELECT COUNT(*) FROM jobs j WHERE state = 'running' AND NOT EXISTS
			(SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.type = 'started')`,
		"queued jobs with a started event": `SELECT COUNT(*) FROM jobs j WHERE state = 'queued' AND EXISTS
			(SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.type = 'started')`,
	} {
		if n := count(t, s, query); n != 0 {
			t.Errorf("%d %s", n, what)
		}
	}
}

// checkIntegrity runs SQLite's integrity and foreign key checks.
func checkIntegrity(t *testing.T, s *Store) {
	t.Helper()
	var result string
	if err := s.r.QueryRow("PRAGMA integrity_check").Scan(&result); err != nil || result != "ok" {
		t.Errorf("PRAGMA integrity_check = %q, %v", result, err)
	}
	rows, err := s.r.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Error("PRAGMA foreign_key_check found rows that reference nothing")
	}
}

// checkAtMostOneUnacknowledged checks that the killed writer committed at
// most the one job it was submitting when it died beyond those it
// acknowledged.
func checkAtMostOneUnacknowledged(t *testing.T, path, prefix string, acked int) {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := count(t, s, "SELECT COUNT(*) FROM jobs WHERE id LIKE ?", prefix+"-%"); n < acked || n > acked+1 {
		t.Errorf("writer %s: %d jobs stored, %d acknowledged", prefix, n, acked)
	}
}
