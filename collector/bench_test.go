package collector_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/internal/influxtest"
)

// One sample of every GPU of a simulated 8-GPU host: eight devices' NVML
// readings and processes, through the same code as real NVML.
func BenchmarkSampleOnce8GPUHost(b *testing.B) {
	c, _, _ := newSimCollector(b, cluster.Node{})
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		if got := c.SampleOnce(now); len(got) != 8 {
			b.Fatalf("%d samples", len(got))
		}
	}
}

// Line protocol encoding of a 5000-sample batch (13 fields each).
func BenchmarkAppendLineProtocol(b *testing.B) {
	batch := gpuOnly(samples("GPU-a", t0, 5000))
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = collector.AppendLineProtocol(buf[:0], batch)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/sample")
}

// gpuOnly drops the processes, so that every sample is one point of 13
// fields.
func gpuOnly(s []collector.Sample) []collector.Sample {
	for i := range s {
		s[i].Processes = nil
	}
	return s
}

const throughputBatch = 5000

// throughputSamples returns n batches of 5000 distinct points (8 GPUs,
// a second apart).
func throughputSamples(n int, start time.Time) [][]collector.Sample {
	out := make([][]collector.Sample, n)
	per := throughputBatch / 8
	for i := range out {
		var batch []collector.Sample
		for g := range 8 {
			batch = append(batch, gpuOnly(samples(fmt.Sprintf("GPU-%d", g), start.Add(time.Duration(i*per)*time.Second), per))...)
		}
		out[i] = batch
	}
	return out
}

// Sink throughput into the local InfluxDB, against a bare batch writer on
// the same server in the same run. The bare writer posts pre-encoded,
// pre-gzipped batches of 5000 points (13 fields each) over HTTP, one after
// another; the collector hands the same number of samples to a Writer over
// the InfluxSink (encoding, gzip, the client library, batching). The two
// take turns, ten batches at a time, so that both see the same server
// and the same load from the rest of the machine. Each iteration is one
// batch of each; the benchmark reports both rates and their ratio.
func BenchmarkInfluxThroughput(b *testing.B) {
	srv := influxtest.Shared(b)
	ctx := context.Background()
	bareBucket, collBucket := newBucket("bench_bare"), newBucket("bench_collector")
	if _, err := collector.EnsureBucket(ctx, http.DefaultClient, srv.URL, "", bareBucket); err != nil {
		b.Fatal(err)
	}
	sink, err := collector.NewInfluxSink(collector.InfluxOptions{URL: srv.URL, Bucket: collBucket})
	if err != nil {
		b.Fatal(err)
	}
	if err := sink.Write(ctx, nil); err != nil { // creates the bucket
		b.Fatal(err)
	}
	batches := throughputSamples(b.N, t0)
	bodies := make([][]byte, b.N)
	for i, batch := range batches {
		lp, _ := collector.AppendLineProtocol(nil, batch)
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(lp)
		zw.Close()
		bodies[i] = z.Bytes()
	}
	endpoint := srv.URL + "/api/v2/write?" + url.Values{"bucket": {bareBucket}, "precision": {"ns"}}.Encode()
	m := collector.NewMetrics(nil)
	w := collector.NewWriter(sink, nil, collector.WriterOptions{BatchSize: throughputBatch}, m, nil)
	defer w.Close(ctx)
	var bare, coll time.Duration
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += 10 {
		hi := min(lo+10, b.N)
		start := time.Now()
		for _, body := range bodies[lo:hi] {
			req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
			req.Header.Set("Content-Encoding", "gzip")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNoContent {
				b.Fatalf("HTTP %d", res.StatusCode)
			}
		}
		bare += time.Since(start)

		start = time.Now()
		for _, batch := range batches[lo:hi] {
			w.Add(batch...)
		}
		for m.Totals().Written < int64(hi*throughputBatch) {
			time.Sleep(100 * time.Microsecond)
		}
		coll += time.Since(start)
	}
	b.StopTimer()
	if got := m.Totals().Written; got != int64(b.N*throughputBatch) {
		b.Fatalf("%d samples written; want %d", got, b.N*throughputBatch)
	}
	points := float64(b.N * throughputBatch)
	b.ReportMetric(points/bare.Seconds(), "bare_points/s")
	b.ReportMetric(points/coll.Seconds(), "collector_points/s")
	b.ReportMetric(bare.Seconds()/coll.Seconds(), "collector/bare")
}
