package collector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

// A write the server refuses because of the token is not "malformed" (that
// would drop the samples) but ErrUnauthorized, so that the samples are kept.
func TestInfluxSinkWrongTokenIsUnauthorizedNotRejected(t *testing.T) {
	srv := influxtest.Start(t, influxtest.Options{Auth: true})
	// On a server with no users, only the first admin may be created.
	adminQuery(t, srv.URL, `CREATE USER admin WITH PASSWORD 'secret' WITH ALL PRIVILEGES`)
	adminQuery(t, srv.URL, `CREATE DATABASE telemetry`)
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: srv.URL, Token: "admin:secret", Bucket: "telemetry/autogen"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sink.Write(ctx, samples("GPU-a", t0, 3)); err != nil {
		t.Fatalf("write with the right token: %v", err)
	}
	sink.Close()

	bad, err := collector.NewInfluxSink(collector.InfluxOptions{URL: srv.URL, Token: "admin:wrong", Bucket: "telemetry/autogen"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Write(ctx, samples("GPU-a", t0, 3))
	var rej *collector.RejectedError
	if !errors.Is(err, collector.ErrUnauthorized) || errors.As(err, &rej) {
		t.Fatalf("write with a wrong token = %v; want ErrUnauthorized, never a rejection", err)
	}
}

// adminQuery runs a statement as the admin. InfluxDB answers a statement's
// error with 200 and the error in the body, and a server just started may
// refuse the first statements (its meta store is still opening; the admin
// just created is not yet seen by the authorizer), so a refused statement is
// tried again for a few seconds before the test fails with the last answer.
func adminQuery(t *testing.T, base, q string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequest(http.MethodPost, base+"/query", strings.NewReader(url.Values{"q": {q}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("admin", "secret")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var out struct {
			Error   string `json:"error"`
			Results []struct {
				Error string `json:"error"`
			} `json:"results"`
		}
		if res.StatusCode == http.StatusOK && json.Unmarshal(body, &out) == nil && out.Error == "" &&
			len(out.Results) > 0 && out.Results[0].Error == "" {
			return
		}
		last = fmt.Sprintf("%s: %s", res.Status, body)
	}
	t.Fatalf("%s: %s", q, last)
}
