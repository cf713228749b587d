package collector_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

func TestSplitBucket(t *testing.T) {
	tests := []struct {
		bucket, db, rp string
		wantErr        bool
	}{
		{bucket: "telemetry/autogen", db: "telemetry", rp: "autogen"},
		{bucket: "telemetry", db: "telemetry"},
		{bucket: "", wantErr: true},
		{bucket: "/autogen", wantErr: true},
		{bucket: "a/b/c", wantErr: true},
	}
	for _, tt := range tests {
		db, rp, err := collector.SplitBucket(tt.bucket)
		if (err != nil) != tt.wantErr || db != tt.db || rp != tt.rp {
			t.Errorf("SplitBucket(%q) = %q, %q, %v; want %q, %q, error %v", tt.bucket, db, rp, err, tt.db, tt.rp, tt.wantErr)
		}
	}
}

// The smoke test of the foundation: a bucket is created on the real server
// that `make test` started, a point is written through the /api/v2 write
// endpoint and read back with Flux.
func TestInfluxSmokeWriteAndReadBack(t *testing.T) {
	srv := influxtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 10 * time.Second}
	bucket := fmt.Sprintf("smoke_%d/week", time.Now().UnixNano())

	created, err := collector.EnsureBucket(ctx, hc, srv.URL, "", bucket)
	if err != nil {
		t.Fatalf("EnsureBucket: %v", err)
	}
	if !created {
		t.Fatalf("EnsureBucket(%s) on a fresh name reported nothing created", bucket)
	}
	created, err = collector.EnsureBucket(ctx, hc, srv.URL, "", bucket)
	if err != nil || created {
		t.Fatalf("EnsureBucket a second time = %v, %v; want false, nil", created, err)
	}

	ts := time.Now().Truncate(time.Second)
	line := fmt.Sprintf("gpu,node=n1,gpu_uuid=GPU-1 power_w=212.5,util_gpu_pct=87i %d", ts.Unix())
	post(t, ctx, hc, srv.URL+"/api/v2/write?precision=s&bucket="+bucket, "text/plain", line, http.StatusNoContent)

	flux := fmt.Sprintf(`from(bucket: %q) |> range(start: -1h) |> filter(fn: (r) => r._measurement == "gpu" and r._field == "power_w")`, bucket)
	csv := post(t, ctx, hc, srv.URL+"/api/v2/query", "application/vnd.flux", flux, http.StatusOK)
	if !strings.Contains(csv, "212.5") || !strings.Contains(csv, "GPU-1") {
		t.Fatalf("Flux query did not return the point written; got:\n%s", csv)
	}
}

func TestEnsureBucketRefusedSaysWhatToDo(t *testing.T) {
	srv := influxtest.Start(t, influxtest.Options{Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := collector.EnsureBucket(ctx, http.DefaultClient, srv.URL, "someone:secret", "telemetry/autogen")
	if !errors.Is(err, collector.ErrBucketForbidden) {
		t.Fatalf("EnsureBucket on a locked-down server: err = %v; want ErrBucketForbidden", err)
	}
	for _, want := range []string{srv.URL, "telemetry/autogen", "CREATE DATABASE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestEnsureBucketUnreachableServer(t *testing.T) {
	srv := influxtest.Start(t, influxtest.Options{})
	srv.Stop()
	_, err := collector.EnsureBucket(context.Background(), &http.Client{Timeout: 2 * time.Second}, srv.URL, "", "telemetry")
	var be *collector.BucketError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("EnsureBucket on a stopped server: err = %v; want a BucketError saying unreachable", err)
	}
}

func post(t *testing.T, ctx context.Context, hc *http.Client, url, contentType, body string, want int) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/csv")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("POST %s: HTTP %d, want %d: %s", url, res.StatusCode, want, b)
	}
	return string(b)
}
