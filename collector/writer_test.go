package collector_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/prescient-sched/prescient/collector"
)

var fastWriter = collector.WriterOptions{BatchSize: 10, FlushInterval: 20 * time.Millisecond, RetryFor: 30 * time.Millisecond,
	MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWriterSpoolsDuringAnOutageAndWritesEverySampleOnceTheSpoolInOrder(t *testing.T) {
	sink := &fakeSink{}
	spool := openSpool(t, t.TempDir(), 64<<20)
	m := collector.NewMetrics(nil)
	w := collector.NewWriter(sink, spool, fastWriter, m, nil)
	all := samples("GPU-a", t0, 300)
	w.Add(all[:100]...)
	waitFor(t, "the first 100 are written", func() bool { return len(sink.received()) == 100 })
	sink.setFailing(true)
	w.Add(all[100:200]...)
	waitFor(t, "the outage's samples are spooled", func() bool { return spool.Bytes() > 0 && metricValue(m.SpoolBytes) > 0 })
	sink.setFailing(false)
	w.Add(all[200:]...)
	waitFor(t, "every sample is written", func() bool { return len(sink.received()) >= 300 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sink.received()
	if len(got) != 300 {
		t.Fatalf("%d samples written; want 300 exactly once", len(got))
	}
	// Every sample once; the spooled ones in the order they came (fresh
	// batches in flight together may land in either order).
	pos := map[string]int{}
	for i, g := range got {
		if _, dup := pos[sampleKey(g)]; dup {
			t.Fatalf("sample %s written twice", sampleKey(g))
		}
		pos[sampleKey(g)] = i
	}
	prev := -1
	for _, s := range all[100:200] {
		p, ok := pos[sampleKey(s)]
		if !ok || p < prev {
			t.Fatalf("spooled sample %s at %d (found %v), after one at %d: want every one, in order", sampleKey(s), p, ok, prev)
		}
		prev = p
	}
	if n := metricValue(m.Written); n != 300 {
		t.Errorf("samples_written_total = %v; want 300", n)
	}
	if n := metricValue(m.Errors.WithLabelValues("sink", "write")); n == 0 {
		t.Error("the outage's failed writes were not counted")
	}
}

func TestWriterDropsAndCountsRejectedSamplesWithoutRetrying(t *testing.T) {
	sink := &fakeSink{reject: true}
	m := collector.NewMetrics(nil)
	w := collector.NewWriter(sink, openSpool(t, t.TempDir(), 64<<20), fastWriter, m, nil)
	w.Add(samples("GPU-a", t0, 10)...)
	waitFor(t, "the batch is rejected", func() bool { return metricValue(m.Rejected) == 10 })
	time.Sleep(50 * time.Millisecond)
	w.Close(context.Background())
	if sink.writes != 1 {
		t.Errorf("a rejected batch was tried %d times; want once", sink.writes)
	}
}

func TestWriterCloseSpoolsWhatItCannotWrite(t *testing.T) {
	sink := &fakeSink{failing: true}
	dir := t.TempDir()
	spool := openSpool(t, dir, 64<<20)
	o := fastWriter
	o.BatchSize, o.FlushInterval = 1000, time.Hour // nothing leaves before Close
	w := collector.NewWriter(sink, spool, o, nil, nil)
	w.Add(samples("GPU-a", t0, 25)...)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, openSpool(t, dir, 64<<20)); len(got) != 25 {
		t.Errorf("after Close the spool holds %d samples; want the 25 pending", len(got))
	}
}

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
