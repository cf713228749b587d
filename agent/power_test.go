package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/executor"
)

// simHost is a simulated NVML host of A100s and the agent's view of its
// first n GPUs; it closes when the test ends.
func simHost(t *testing.T, seed uint64, n int) (*nvml.Sim, []protocol.GPUInfo) {
	t.Helper()
	host, err := nvml.NewSim(nvml.SimOptions{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	var gpus []protocol.GPUInfo
	for i, u := range host.UUIDs()[:n] {
		gpus = append(gpus, protocol.GPUInfo{Index: i, UUID: u, Model: "A100-SXM4-40GB", MemoryBytes: 40 << 30})
	}
	return host, gpus
}

// A job that asks for a power cap runs with its GPUs' limits lowered, on
// the simulated NVML host the agent would sample, and the limits come
// back when it ends; the other GPUs keep theirs.
func TestAJobsPowerCapIsSetOnItsGPUsAndLifted(t *testing.T) {
	host, gpus := simHost(t, 9, 4)
	p := newPlane(t, agenthub.HubOptions{})
	a, err := New(Config{
		Server: p.url(), Token: testToken, WorkDir: t.TempDir(), Node: protocol.NodeInfo{Name: "n1", Rack: "r1", GPUs: gpus},
		PollWait: 2 * time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, AckPoll: 20 * time.Millisecond,
		Env: []string{"PATH=" + os.Getenv("PATH")}, Load: host, Power: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	defer func() { cancel(); wg.Wait(); killJobs(a) }()
	p.next(executor.NodeSynced, "")

	limits := func() []float64 {
		devs, _ := host.Devices()
		out := make([]float64, 4)
		for i := range out {
			s, err := devs[i].Sample()
			if err != nil {
				t.Fatal(err)
			}
			out[i] = s.PowerLimitW
		}
		return out
	}
	as := assignment("capped", 1, gpusOf("n1", 2, 3), "--steps=40", "--step-time=25ms")
	as.PowerLimitFraction = 0.7
	if err := p.hub.Start(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobStarted, "capped")
	if got := limits(); got[0] != 400 || got[1] != 400 || got[2] != 280 || got[3] != 280 {
		t.Errorf("while the job runs: limits %v W, want GPUs 2 and 3 at 280 (0.7 of 400), the others at 400", got)
	}
	if e := p.next(executor.JobExited, "capped"); e.ExitCode != 0 {
		t.Fatalf("exit %+v", e)
	}
	deadline := time.Now().Add(5 * time.Second)
	for got := limits(); got[2] != 400 || got[3] != 400; got = limits() {
		if time.Now().After(deadline) {
			t.Fatalf("after the job: limits %v W, want all back at 400", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A fraction no agent can set is refused before it reaches one.
	bad := assignment("bad", 1, gpusOf("n1", 0), "--steps=1")
	bad.PowerLimitFraction = 1.5
	if err := p.hub.Start(context.Background(), bad); err == nil {
		t.Error("a power limit fraction of 1.5 was sent")
	}
}

// An agent that died while a capped job ran, the job ending meanwhile,
// left the GPU capped; the next agent on the work directory sets it back,
// and caps again the GPU of a capped job that still runs.
func TestANewAgentSettlesTheCapsItFinds(t *testing.T) {
	host, gpus := simHost(t, 10, 2)
	uuids := host.UUIDs()
	// GPU 0: its capped job ended while no agent watched (no such process
	// now), the cap still set. GPU 1: a capped job (this test's own
	// process, alive) runs on, its GPU reset meanwhile.
	if _, err := host.SetPowerLimitFraction(uuids[0], 0.5); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	self, err := readProcStat("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := saveState(filepath.Join(dir, stateFileName), []record{
		{Job: "gone", Attempt: 1, WorldSize: 1, GPUs: []int{0}, StartedAt: time.Now(), PID: 1 << 30, PowerLimitFraction: 0.5},
		{Job: "alive", Attempt: 1, WorldSize: 1, GPUs: []int{1}, StartedAt: time.Now(), PID: os.Getpid(), StartTicks: self.StartTicks,
			PowerLimitFraction: 0.6},
	}); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Server: "http://127.0.0.1:1", Token: testToken, WorkDir: dir, Node: protocol.NodeInfo{Name: "n1", GPUs: gpus}, Power: host})
	if err != nil {
		t.Fatal(err)
	}
	_ = a
	devs, _ := host.Devices()
	for i, want := range []float64{400, 240} {
		if s, err := devs[i].Sample(); err != nil || s.PowerLimitW != want {
			t.Errorf("GPU %d after the new agent started: %g W (%v), want %g", i, s.PowerLimitW, err, want)
		}
	}
}
