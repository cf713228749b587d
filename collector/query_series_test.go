package collector_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

// Samples written through the sink come back as one series per device,
// named node/UUID, through the selector that --series influx: takes.
func TestInfluxSeriesReadBack(t *testing.T) {
	srv := influxtest.Shared(t)
	ctx := context.Background()
	bucket := newBucket("idleseries")
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: srv.URL, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	written := append(samples("GPU-a", t0, 20), samples("GPU-b", t0, 20)...)
	if err := sink.Write(ctx, written); err != nil {
		t.Fatal(err)
	}
	sel, err := collector.ParseSeriesSelector(srv.URL + "?bucket=" + url.QueryEscape(bucket) + "&field=util_gpu_pct&step=1s" +
		"&start=" + t0.Format(time.RFC3339) + "&end=" + t0.Add(20*time.Second).Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	q, err := collector.NewInfluxQuery(sel.Influx)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	got, err := collector.ReadSeries(ctx, q, sel.Query)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "node-1/GPU-a" || got[1].ID != "node-1/GPU-b" || len(got[0].Values) != 20 {
		t.Fatalf("%d series: %+v", len(got), got)
	}
	for i, v := range got[1].Values {
		if w := written[20+i]; v != w.UtilGPUPct || !got[1].Times[i].Equal(w.Time) {
			t.Fatalf("point %d: %v at %s; want %v at %s", i, v, got[1].Times[i], w.UtilGPUPct, w.Time)
		}
	}
}

func TestParseSeriesSelector(t *testing.T) {
	sel, err := collector.ParseSeriesSelector("http://u:p@127.0.0.1:8086?bucket=prescient/autogen&start=2026-03-01&end=2026-03-02&gpus=a,b&agg=max&step=5m")
	if err != nil {
		t.Fatal(err)
	}
	if sel.Influx.URL != "http://127.0.0.1:8086" || sel.Influx.Token != "u:p" || sel.Query.Field != "util_gpu_pct" ||
		sel.Query.Step != 5*time.Minute || len(sel.Query.GPUs) != 2 || sel.Query.Agg != "max" {
		t.Fatalf("%+v", sel)
	}
	for in, want := range map[string]string{
		"ftp://127.0.0.1:8086":                                                        "want http(s)",
		"http://h:1?bucket=db/rp&start=2026-03-01":                                    `"end" is missing`,
		"http://h:1?bucket=db/rp&start=2026-03-01&end=2026-03-02&x=1":                 `"x" is unknown`,
		"http://h:1?bucket=db/rp&start=2026-03-01&end=2026-03-02&step=-1m":            "step",
		"http://h:1?bucket=db/rp&start=2026-03-02&end=2026-03-01":                     "empty",
		"http://h:1?start=2026-03-01&end=2026-03-02":                                  "bucket",
		"http://u:secret@h:1?bucket=db/rp&start=2026-03-01&end=2026-03-02&field=nope": "field",
	} {
		_, err := collector.ParseSeriesSelector(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: err = %v, want it to contain %q and no password", in, err, want)
		}
	}
}

func FuzzParseSeriesSelector(f *testing.F) {
	f.Add("http://u:p@127.0.0.1:8086?bucket=prescient/autogen&start=2026-03-01&end=2026-03-02&gpus=a,b")
	f.Add("https://h?bucket=a/b&start=2026-03-01T00:00:00Z&end=2026-03-01T01:00:00Z&step=1s&agg=last")
	f.Add("http://h?bucket=%zz")
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := collector.ParseSeriesSelector(s)
		if err != nil {
			return
		}
		if err := sel.Query.Validate(); err != nil || sel.Influx.Validate() != nil {
			t.Fatalf("%q accepted with an invalid query: %v", s, err)
		}
	})
}
