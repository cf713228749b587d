package datasets

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// BenchmarkReadPhilly parses the real 74,167-row Philly table from memory.
func BenchmarkReadPhilly(b *testing.B) {
	benchmarkRead(b, readPhilly, "philly", "philly_jobs.csv")
}

// BenchmarkReadOpenb parses the real 8,152-pod openb list from memory.
func BenchmarkReadOpenb(b *testing.B) {
	benchmarkRead(b, readOpenb, "alibaba-openb", "openb_pod_list_default.csv")
}

func benchmarkRead(b *testing.B, read func(io.Reader, string, ReadOptions) (Result, error), dir, file string) {
	data, err := os.ReadFile(sharedDataset(b, dir, file))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	rows := 0
	for b.Loop() {
		res, err := read(bytes.NewReader(data), file, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rows += len(res.Jobs)
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkGenerate generates 100,000 jobs.
func BenchmarkGenerate(b *testing.B) {
	cfg := DefaultGenerateConfig()
	cfg.Jobs = 100000
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cfg.Jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkWriteJSONL writes 10,000 generated jobs.
func BenchmarkWriteJSONL(b *testing.B) {
	cfg := DefaultGenerateConfig()
	jobs, err := Generate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := WriteJSONL(&buf, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}
