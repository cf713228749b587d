package collector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/internal/influxtest"
	"github.com/prescient-sched/prescient/store"
)

// newBucket returns a bucket name no other test uses.
func newBucket(prefix string) string {
	return fmt.Sprintf("%s_%d/autogen", prefix, time.Now().UnixNano())
}

// countPoints counts the distinct gpu points (series and time) of a
// bucket with InfluxQL, which counts each stored point once however often
// it was written.
func countPoints(t *testing.T, serverURL, bucket string) int {
	t.Helper()
	db, _, _ := collector.SplitBucket(bucket)
	q := url.Values{"db": {db}, "q": {"SELECT COUNT(power_w) FROM gpu"}}
	res, err := http.Get(serverURL + "/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		Results []struct {
			Series []struct {
				Values [][]any `json:"values"`
			} `json:"series"`
		} `json:"results"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Results) == 0 || len(r.Results[0].Series) == 0 {
		return 0
	}
	return int(r.Results[0].Series[0].Values[0][1].(float64))
}

// Points written equal points read back, field by field, through the
// telemetry query API, from InfluxDB and from the embedded store alike.
func TestInfluxPointsReadBackEqualPointsWritten(t *testing.T) {
	srv := influxtest.Shared(t)
	ctx := context.Background()
	o := collector.InfluxOptions{URL: srv.URL, Bucket: newBucket("roundtrip")}
	sink, err := collector.NewInfluxSink(o)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	written := append(samples("GPU-a", t0, 20), samples("GPU-b", t0, 20)...)
	for i := range written[20:] {
		written[20+i].PowerW += 1000
	}
	if err := sink.Write(ctx, written); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	emb := collector.NewEmbeddedSink(st)
	if err := emb.Write(ctx, written); err != nil {
		t.Fatal(err)
	}
	iq, err := collector.NewInfluxQuery(o)
	if err != nil {
		t.Fatal(err)
	}
	defer iq.Close()
	for name, ts := range map[string]collector.TelemetryStore{"influxdb": iq, "embedded": emb} {
		for _, f := range collector.Fields {
			q := collector.SeriesQuery{Field: f.Name, Start: t0, End: t0.Add(20 * time.Second), Step: time.Second}
			series, err := ts.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, f.Name, err)
			}
			if len(series) != 2 || series[0].GPU != "GPU-a" || series[1].GPU != "GPU-b" {
				t.Fatalf("%s: %s: %d series; want GPU-a and GPU-b", name, f.Name, len(series))
			}
			for k, ser := range series {
				if len(ser.Points) != 20 || ser.Node != "node-1" {
					t.Fatalf("%s: %s of %s: %d points on %q; want 20 on node-1", name, f.Name, ser.GPU, len(ser.Points), ser.Node)
				}
				for i, p := range ser.Points {
					w := &written[k*20+i]
					if !p.Time.Equal(w.Time) || p.Value != fieldValue(f, w) {
						t.Fatalf("%s: %s of %s, point %d: %v at %s; want %v at %s", name, f.Name, ser.GPU, i, p.Value, p.Time, fieldValue(f, w), w.Time)
					}
				}
			}
		}
		// A window of 5 s averages five samples.
		series, err := ts.Query(ctx, collector.SeriesQuery{Field: "power_w", GPUs: []string{"GPU-b"}, Start: t0, End: t0.Add(10 * time.Second), Step: 5 * time.Second})
		if err != nil || len(series) != 1 || len(series[0].Points) != 2 || series[0].Points[0].Value != 1062.5 {
			t.Errorf("%s: 5 s mean of GPU-b's power = %+v, %v; want 2 points, the first 1062.5", name, series, err)
		}
	}
}

// fieldValue reads a field of a sample as the query API returns it.
func fieldValue(f collector.Field, s *collector.Sample) float64 {
	if f.Int {
		return float64(f.IntValue(s))
	}
	return f.Value(s)
}

// proxy is a TCP forwarder with a fixed address in front of a server that
// is stopped and restarted on other ports.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string // host:port
}

func newProxy(t *testing.T, targetURL string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.setTarget(targetURL)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) setTarget(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = strings.TrimPrefix(u, "http://")
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// InfluxDB stopped for a while in the middle of a run and started again:
// every sample still arrives, exactly once.
func TestInfluxOutageLosesNothingAndDuplicatesNothing(t *testing.T) {
	srv := influxtest.Start(t, influxtest.Options{})
	px := newProxy(t, srv.URL)
	bucket := newBucket("outage")
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: px.URL(), Bucket: bucket, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nvml.NewSim(nvml.SimOptions{Seed: 21})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	m := collector.NewMetrics(nil)
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: "node-1", Host: sim}}, Interval: 50 * time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	spool := openSpool(t, t.TempDir(), 64<<20)
	w := collector.NewWriter(sink, spool, collector.WriterOptions{BatchSize: 200, FlushInterval: 200 * time.Millisecond,
		RetryFor: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}, m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(ctx, w, 0) }()

	time.Sleep(time.Second)
	srv.Stop()
	t.Log("InfluxDB stopped")
	waitFor(t, "samples are spooled", func() bool { return spool.Bytes() > 0 })
	time.Sleep(time.Second)
	srv.Restart(t)
	px.setTarget(srv.URL)
	t.Log("InfluxDB restarted")
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-runDone
	waitFor(t, "the spool is written back", func() bool { return spool.Bytes() == 0 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	taken := int(metricValue(m.Samples))
	got := countPoints(t, srv.URL, bucket)
	t.Logf("taken %d samples, stored %d distinct points, sink writes counted %v, write errors %v", taken, got,
		metricValue(m.Written), metricValue(m.Errors.WithLabelValues("sink", "write")))
	if got != taken {
		t.Fatalf("InfluxDB holds %d distinct points; the collector took %d samples", got, taken)
	}
	if metricValue(m.Errors.WithLabelValues("sink", "write")) == 0 {
		t.Error("no write failed: the outage was not seen")
	}
}

// Job labels reach InfluxDB: the allow-listed ones as tags (queryable in
// GROUP BY), the others as string fields.
func TestInfluxJobLabelsAreTagsOrFields(t *testing.T) {
	srv := influxtest.Shared(t)
	o := collector.InfluxOptions{URL: srv.URL, Bucket: newBucket("labels")}
	sink, err := collector.NewInfluxSink(o)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	s := samples("GPU-l", t0, 3)
	for i := range s {
		s[i].Processes[0].LabelTags = map[string]string{"experiment": "exp, 7"}
		s[i].Processes[0].LabelFields = map[string]string{"run": `r"42`}
	}
	if err := sink.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	db, _, _ := collector.SplitBucket(o.Bucket)
	q := url.Values{"db": {db}, "q": {`SELECT COUNT(mem_used_bytes), LAST(label_run) FROM gpu_process WHERE label_experiment = 'exp, 7' GROUP BY label_experiment`}}
	res, err := http.Get(srv.URL + "/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		Results []struct {
			Series []struct {
				Tags   map[string]string `json:"tags"`
				Values [][]any           `json:"values"`
			} `json:"series"`
			Error string `json:"error"`
		} `json:"results"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Results) == 0 || len(r.Results[0].Series) != 1 {
		t.Fatalf("query answered %+v; want one series tagged with the experiment", r)
	}
	ser := r.Results[0].Series[0]
	if ser.Tags["label_experiment"] != "exp, 7" || ser.Values[0][1].(float64) != 3 || ser.Values[0][2] != `r"42` {
		t.Errorf("series %+v; want 3 points of experiment \"exp, 7\" with run r\"42", ser)
	}
}
