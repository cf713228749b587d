package collector

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
)

// JobRegistry tells which job a process belongs to. The node agent fills
// one as it starts jobs; ProcJobs reads it from /proc; the simulator knows
// its own.
type JobRegistry interface {
	JobOfPID(pid int) (jobID string, ok bool)
}

// JobLabels is implemented by registries that know jobs' labels (the node
// agent): the collector writes them with the job's processes.
type JobLabels interface {
	LabelsOfJob(jobID string) map[string]string
}

// JobRegistries asks each registry in turn; the first that knows wins.
type JobRegistries []JobRegistry

// LabelsOfJob implements JobLabels: the labels from the first registry
// that knows the job's.
func (rs JobRegistries) LabelsOfJob(jobID string) map[string]string {
	for _, r := range rs {
		if l, ok := r.(JobLabels); ok {
			if labels := l.LabelsOfJob(jobID); labels != nil {
				return labels
			}
		}
	}
	return nil
}

// JobOfPID implements JobRegistry.
func (rs JobRegistries) JobOfPID(pid int) (string, bool) {
	for _, r := range rs {
		if r == nil {
			continue
		}
		if id, ok := r.JobOfPID(pid); ok {
			return id, true
		}
	}
	return "", false
}

// MapRegistry is a JobRegistry the agent fills: Set when it starts a
// job's process, Delete when the process ends. It is safe for concurrent
// use.
type MapRegistry struct {
	mu   sync.RWMutex
	jobs map[int]string
}

// Set records that pid belongs to job.
func (r *MapRegistry) Set(pid int, job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[int]string{}
	}
	r.jobs[pid] = job
}

// Delete forgets pid.
func (r *MapRegistry) Delete(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, pid)
}

// JobOfPID implements JobRegistry.
func (r *MapRegistry) JobOfPID(pid int) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	id, ok := r.jobs[pid]
	return id, ok
}

// EnvJobID is the environment variable that names a process's job.
const EnvJobID = "PRESCIENT_JOB_ID"

// ProcJobs finds a process's job from /proc: PRESCIENT_JOB_ID in
// /proc/PID/environ, else a job or pod ID in /proc/PID/cgroup. Reading
// another user's environ needs privileges; without them only the cgroup
// tells.
type ProcJobs struct {
	// Root is the proc file system; default /proc.
	Root string
}

// JobOfPID implements JobRegistry.
func (p ProcJobs) JobOfPID(pid int) (string, bool) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		if id, ok := ParseEnviron(b); ok {
			return id, true
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
		if id, ok := ParseCgroup(b); ok {
			return id, true
		}
	}
	return "", false
}

// ParseEnviron returns PRESCIENT_JOB_ID from the NUL-separated contents of
// /proc/PID/environ; an empty value counts as absent.
func ParseEnviron(environ []byte) (string, bool) {
	prefix := []byte(EnvJobID + "=")
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok && len(v) > 0 && validJobID(v) {
			return string(v), true
		}
	}
	return "", false
}

// cgroupPatterns find a job in a cgroup path, most specific first:
// a Prescient job slice or scope ("prescient-job-ID.scope",
// "/prescient/ID/"), then a Kubernetes pod ("pod<uid>", with dashes or
// underscores in the UID as the systemd and cgroupfs drivers write it),
// reported as "pod:<uid>".
var cgroupPatterns = []struct {
	re     *regexp.Regexp
	prefix string
}{
	{re: regexp.MustCompile(`prescient-job-([A-Za-z0-9._:-]+?)\.(?:scope|slice)`)},
	{re: regexp.MustCompile(`/prescient/([A-Za-z0-9._:-]+)(?:/|$)`)},
	{re: regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`), prefix: "pod:"},
}

// ParseCgroup returns the job named by the contents of /proc/PID/cgroup
// (lines "hierarchy:controllers:path").
func ParseCgroup(cgroup []byte) (string, bool) {
	for _, p := range cgroupPatterns {
		for line := range bytes.SplitSeq(cgroup, []byte{'\n'}) {
			_, rest, ok := bytes.Cut(line, []byte{':'})
			if !ok {
				continue
			}
			_, path, ok := bytes.Cut(rest, []byte{':'})
			if !ok {
				continue
			}
			if m := p.re.FindSubmatch(path); m != nil {
				id := m[1]
				if p.prefix != "" {
					id = bytes.ReplaceAll(id, []byte{'_'}, []byte{'-'})
				}
				return p.prefix + string(id), true
			}
		}
	}
	return "", false
}

// validJobID accepts what a job ID may hold in a tag: printable ASCII
// without spaces, at most 256 bytes.
func validJobID(b []byte) bool {
	if len(b) > 256 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}
