package datasets

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// The fuzzers feed arbitrary bytes to every parser of outside input. None
// may panic; what they accept must keep the readers' contract.

func FuzzPhilly(f *testing.F) {
	f.Add(readTestdata(f, "philly_small.csv"))
	f.Add([]byte(phillyHeader + "2017-10-09 07:01:55,NaN,-1,x,\n" + `"a,b`))
	f.Add([]byte(phillyHeader + "0000-01-01,1e400,99999999999999999999,1,vc\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkTraceReader(t, bytesReader(readPhilly), data) })
}

func FuzzOpenb(f *testing.F) {
	f.Add(readTestdata(f, "openb_small.csv"))
	f.Add([]byte(openbHeader + "p,1,1,1,500,A||B,,Pending,1e9,,\np,1,1,1,1000,,LS,Running,0,,0\n"))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,500\nq,0,1,0,0\n"))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np,1,1,1,1000,0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkTraceReader(t, bytesReader(readOpenb), data) })
}

func FuzzSWF(f *testing.F) {
	f.Add(readTestdata(f, "swf_small.swf"))
	f.Add([]byte("; UnixStartTime: 1\n; Partition: 1 a\n1 0 -1 -1 -1 -1 -1 -1 -1 -1 2 -1 -1 -1 -1 1 -1 -1\n1 0 0 0 0 0.5 0 0 0 0 3 0 0 0 0 0 0 0\r\n"))
	f.Add([]byte("1 99999999999 0 1 100001 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n;UnixStartTime: 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := checkTraceReader(t, bytesReader(readSWF), data)
		checkRewriteIsStable(t, res.Jobs)
	})
}

func FuzzSlurm(f *testing.F) {
	for _, name := range []string{"sacct_small.txt", "sacct_v0.0.38.json", "sacct_v0.0.40.json", "sacct_22.05.txt", "sacct_22.05.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("\ufeffJobID|User|Account|Partition|QOS|JobName|Submit|Start|End|Elapsed|Timelimit|AllocTRES|ReqTRES|State|ExitCode\n" +
		"1|u|||||2024-01-01T00:00:00|Unknown|Unknown|99999-00:00:00|1:2:3|gres/gpu:x=7,mem=1e30P||REQUEUED|0:200\n"))
	f.Add([]byte(`{"jobs":[{"job_id":{"set":true,"number":1e300},"time":{"submission":{"number":-1}},"state":{"current":[]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := checkTraceReader(t, bytesReader(readSlurm), data)
		checkRewriteIsStable(t, res.Jobs)
	})
}

func FuzzSWFFleet(f *testing.F) {
	f.Add(readTestdata(f, "swf_small.swf"))
	f.Add([]byte("; MaxNodes: 0\n; MaxProcs: 9223372036854775807\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFleet(t, func() (*cluster.Fleet, error) {
			return swfFleet(writeTemp(t, data, "f.swf"))
		})
	})
}

func FuzzPrescient(f *testing.F) {
	f.Add(readTestdata(f, "prescient_golden.jsonl"))
	f.Add([]byte(`{"id":"a","submit_time":"2024-01-01","state":"queued","run_time_s":1e300}` + "\n\n{}"))
	f.Add([]byte(`{"id":"y","submit_time":"9999-12-31T23:59:59-01:00","state":"queued"}`)) // year 10000 in UTC
	f.Add([]byte(`{"id":"b","gpus":1,"gpu_milli":1001,"submit_time":"2024-01-01","state":"running","run_time_s":4.9e-10}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res := checkTraceReader(t, bytesReader(readPrescient), data)
		checkRewriteIsStable(t, res.Jobs)
	})
}

// bytesReader adapts a format's reader to the fuzzers' input.
func bytesReader(read func(r io.Reader, file string, opt ReadOptions) (Result, error)) func([]byte, ReadOptions) (Result, error) {
	return func(data []byte, opt ReadOptions) (Result, error) { return read(bytes.NewReader(data), "fuzz", opt) }
}

// checkTraceReader runs read strictly and leniently and checks the contract.
func checkTraceReader(t *testing.T, read func([]byte, ReadOptions) (Result, error), data []byte) Result {
	t.Helper()
	strict, strictErr := read(data, ReadOptions{})
	checkReadError(t, strictErr)
	res, err := read(data, ReadOptions{Lenient: true, MaxErrors: 3})
	checkReadError(t, err)
	if err != nil {
		return Result{}
	}
	if strictErr == nil && (res.Skipped != 0 || !reflect.DeepEqual(res.Jobs, strict.Jobs)) {
		t.Fatalf("a clean strict read and the lenient read differ")
	}
	if res.Skipped < len(res.Errors) || len(res.Errors) > 3 {
		t.Fatalf("%d skipped, %d errors kept", res.Skipped, len(res.Errors))
	}
	for _, e := range res.Errors {
		checkReadError(t, e)
	}
	assertSortedValid(t, res.Jobs)
	return res
}

func checkReadError(t *testing.T, err error) {
	t.Helper()
	var pe *ParseError
	if errors.As(err, &pe) && (pe.Line < 1 || pe.Err == nil || pe.Error() == "") {
		t.Fatalf("malformed ParseError %#v", pe)
	}
}

// checkRewriteIsStable writes accepted jobs and reads them back: the same
// jobs must come back, durations to the microsecond (seconds travel as
// float64).
func checkRewriteIsStable(t *testing.T, jobs []cluster.Job) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, jobs); err != nil {
		t.Fatalf("writing accepted jobs: %v", err)
	}
	back, err := readPrescient(&buf, "rewrite.jsonl", ReadOptions{})
	if err != nil {
		t.Fatalf("reading written jobs: %v\n%s", err, buf.Bytes())
	}
	if len(back.Jobs) != len(jobs) {
		t.Fatalf("wrote %d jobs, read %d", len(jobs), len(back.Jobs))
	}
	for i := range jobs {
		a, b := jobs[i], back.Jobs[i]
		if !near(a.Outcome.RunTime, b.Outcome.RunTime) || !near(a.Spec.CheckpointCost, b.Spec.CheckpointCost) || !near(a.Spec.TimeLimit, b.Spec.TimeLimit) {
			t.Fatalf("job %s durations changed: %v→%v, %v→%v, %v→%v", a.ID, a.Outcome.RunTime, b.Outcome.RunTime, a.Spec.CheckpointCost, b.Spec.CheckpointCost, a.Spec.TimeLimit, b.Spec.TimeLimit)
		}
		b.Outcome.RunTime, b.Spec.CheckpointCost, b.Spec.TimeLimit = a.Outcome.RunTime, a.Spec.CheckpointCost, a.Spec.TimeLimit
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("job changed on rewrite:\n was %+v\n now %+v", a, b)
		}
	}
}

func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

func FuzzPhillyMachines(f *testing.F) {
	f.Add(readTestdata(f, "philly_machines_small.csv"))
	f.Add([]byte("machineId, number of GPUs, single GPU mem\nm0,64, 24GB\nm0,-1,12GB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFleet(t, func() (*cluster.Fleet, error) { return readPhillyMachines(bytes.NewReader(data), "f.csv") })
	})
}

func FuzzOpenbNodes(f *testing.F) {
	f.Add(readTestdata(f, "openb_nodes_small.csv"))
	f.Add([]byte("sn,cpu_milli,memory_mib,gpu,model\nn,9223372036854775807,1099511627776,64,G2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFleet(t, func() (*cluster.Fleet, error) { return readOpenbNodes(bytes.NewReader(data), "f.csv") })
	})
}

func checkFleet(t *testing.T, read func() (*cluster.Fleet, error)) {
	t.Helper()
	f, err := read()
	if err != nil {
		return
	}
	if len(f.Nodes) == 0 {
		t.Fatal("accepted a fleet without nodes")
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("accepted an invalid fleet: %v", err)
	}
}
