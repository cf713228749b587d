package collector_test

import (
	"testing"

	"github.com/prescient-sched/prescient/collector"
)

func TestProcJobsFindsTheJobOfAProcess(t *testing.T) {
	reg := collector.ProcJobs{Root: "testdata/proc"}
	tests := []struct {
		name    string
		pid     int
		want    string
		wantHit bool
	}{
		{name: "PRESCIENT_JOB_ID in the environment wins over the cgroup", pid: 100, want: "job-42", wantHit: true},
		{name: "a Kubernetes pod's UID comes from its cgroup", pid: 200, want: "pod:3f0a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8", wantHit: true},
		{name: "a process outside any job has none", pid: 300},
		{name: "a prescient job scope names the job", pid: 400, want: "train-7", wantHit: true},
		{name: "a process that is gone has none", pid: 999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := reg.JobOfPID(tt.pid)
			if got != tt.want || ok != tt.wantHit {
				t.Errorf("JobOfPID(%d) = %q, %v; want %q, %v", tt.pid, got, ok, tt.want, tt.wantHit)
			}
		})
	}
}

func TestParseCgroup(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "cgroup v2 systemd pod slice with underscores", in: "0::/kubepods.slice/kubepods-pod01234567_89ab_cdef_0123_456789abcdef.slice/x.scope\n", want: "pod:01234567-89ab-cdef-0123-456789abcdef"},
		{name: "cgroup v1 cgroupfs pod path", in: "4:cpu:/kubepods/besteffort/pod01234567-89ab-cdef-0123-456789abcdef/ctr\n", want: "pod:01234567-89ab-cdef-0123-456789abcdef"},
		{name: "the agent's /prescient/ID hierarchy", in: "0::/prescient/j-9/\n", want: "j-9"},
		{name: "a job scope is preferred to a pod", in: "0::/kubepods/pod01234567-89ab-cdef-0123-456789abcdef\n1::/prescient-job-x1.scope\n", want: "x1"},
		{name: "a line without the three fields is skipped", in: "garbage\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := collector.ParseCgroup([]byte(tt.in))
			if got != tt.want {
				t.Errorf("ParseCgroup(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseEnviron(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "the variable among others", in: "A=1\x00PRESCIENT_JOB_ID=j1\x00B=2", want: "j1"},
		{name: "an empty value is no job", in: "PRESCIENT_JOB_ID=\x00", want: ""},
		{name: "a value with a space is refused", in: "PRESCIENT_JOB_ID=a b\x00", want: ""},
		{name: "a longer name that starts the same is not it", in: "PRESCIENT_JOB_IDX=j1\x00", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := collector.ParseEnviron([]byte(tt.in)); got != tt.want {
				t.Errorf("ParseEnviron(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJobRegistriesAskInTurn(t *testing.T) {
	var m collector.MapRegistry
	m.Set(7, "from-agent")
	regs := collector.JobRegistries{&m, collector.ProcJobs{Root: "testdata/proc"}}
	if got, _ := regs.JobOfPID(7); got != "from-agent" {
		t.Errorf("pid 7: %q; want from-agent", got)
	}
	if got, _ := regs.JobOfPID(100); got != "job-42" {
		t.Errorf("pid 100: %q; want job-42", got)
	}
	m.Delete(7)
	if _, ok := regs.JobOfPID(7); ok {
		t.Error("a deleted pid still has a job")
	}
}
