package collector_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

// A write the server refuses because of the token is not "malformed" (that
// would drop the samples) but ErrUnauthorized, so that the samples are kept.
func TestInfluxSinkWrongTokenIsUnauthorizedNotRejected(t *testing.T) {
	srv := influxtest.Start(t, influxtest.Options{Auth: true})
	// On a server with no users, only the first admin may be created.
	for _, q := range []string{
		`CREATE USER admin WITH PASSWORD 'secret' WITH ALL PRIVILEGES`,
		`CREATE DATABASE telemetry`,
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/query", strings.NewReader(url.Values{"q": {q}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("admin", "secret")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", q, res, err)
		}
		res.Body.Close()
	}
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
