package collector_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
)

// t0 is the time test samples start from.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// samples returns n samples of one GPU, a second apart from start, each
// with every field set to values that tell them apart.
func samples(gpu string, start time.Time, n int) []collector.Sample {
	out := make([]collector.Sample, n)
	for i := range out {
		out[i] = collector.Sample{
			Time:       start.Add(time.Duration(i) * time.Second),
			Node:       "node-1",
			DeviceInfo: nvml.DeviceInfo{UUID: gpu, Index: 3, Model: "NVIDIA A100-SXM4-40GB", MemoryTotalBytes: 40 << 30},
			DeviceSample: nvml.DeviceSample{
				UtilGPUPct: float64(i % 101), UtilMemPct: float64(i % 61), MemUsedBytes: uint64(i) << 20, MemTotalBytes: 40 << 30,
				PowerW: 60.5 + float64(i%300), EnergyJ: 1e6 + float64(i)*0.25, TemperatureC: 40 + float64(i%40), SMClockMHz: 1410,
				PowerLimitW: 400, ThrottleReasons: 4, ECCCorrected: uint64(i), ECCUncorrected: 1, XIDErrors: 2,
			},
			Processes: []collector.ProcessSample{{PID: 1000 + i%3, MemUsedBytes: 1 << 30, JobID: "job-1"}},
		}
	}
	return out
}

// fakeSink records what it is given and fails while told to.
type fakeSink struct {
	mu      sync.Mutex
	got     []collector.Sample
	failing bool
	reject  bool
	writes  int
}

var errDown = errors.New("sink down")

func (s *fakeSink) Write(_ context.Context, b []collector.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.failing {
		return errDown
	}
	if s.reject {
		return &collector.RejectedError{Samples: len(b), Err: errors.New("malformed")}
	}
	s.got = append(s.got, b...)
	return nil
}

func (s *fakeSink) Close() error { return nil }

func (s *fakeSink) setFailing(f bool) { s.mu.Lock(); s.failing = f; s.mu.Unlock() }

func (s *fakeSink) received() []collector.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]collector.Sample(nil), s.got...)
}

// sampleKey names a sample by device and time.
func sampleKey(s collector.Sample) string { return fmt.Sprintf("%s@%d", s.UUID, s.Time.UnixNano()) }
