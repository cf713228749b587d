package slurm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// Bounds on what a TRES list may say: a million CPUs and GPUs, an
// exbibyte of memory.
const (
	maxCount = 1_000_000
	maxBytes = 1 << 60
	maxDays  = 50 * 365 // the longest duration: 50 years
)

var (
	errNotNumber = errors.New("not a number")
	errNegative  = errors.New("is negative")
	errTooLarge  = errors.New("is too large")
)

// Spec is the job model's spec of a Slurm job, one rule for its
// accounting (datasets' slurm reader) and its live queue: the account is
// the tenant (the user where empty), partition and QOS are labels, GPUs,
// CPUs and memory come from its TRES, the time limit is its own.
func Spec(user, account, name, partition, qos string, t TRES, limit time.Duration) cluster.JobSpec {
	spec := cluster.JobSpec{Tier: cluster.DefaultTier, User: user, Tenant: cmp.Or(account, user), Name: name,
		GPUs: int(t.GPUs), CPUMilli: t.CPUs * 1000, MemoryBytes: t.MemoryBytes, TimeLimit: limit}
	if spec.GPUs > 0 {
		spec.GPUMilli = cluster.MilliGPU
	}
	if partition != "" || qos != "" {
		spec.Labels = map[string]string{}
		if partition != "" {
			spec.Labels[cluster.LabelPartition] = partition
		}
		if qos != "" {
			spec.Labels[cluster.LabelQoS] = qos
		}
	}
	return spec
}

// TRES is what a TRES list gives: GPUs, CPUs and memory.
type TRES struct {
	GPUs, CPUs, MemoryBytes int64
}

// ParseTRES reads "billing=4,cpu=4,gres/gpu=2,mem=16G,node=1" (squeue's
// and sacct's AllocTRES and ReqTRES). gres/gpu counts typed GPUs
// ("gres/gpu:a100=2") when there is no plain count.
func ParseTRES(s string) (TRES, error) {
	var t TRES
	var gpus GPUTally
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return TRES{}, fmt.Errorf("%q is not name=value", kv)
		}
		gres, isGRES := strings.CutPrefix(k, "gres/")
		switch {
		case k == "cpu":
			n, err := count(v)
			if err != nil {
				return TRES{}, fmt.Errorf("cpu: %w", err)
			}
			t.CPUs = n
		case k == "mem":
			b, err := ParseBytes(v)
			if err != nil {
				return TRES{}, fmt.Errorf("mem: %w", err)
			}
			t.MemoryBytes = b
		case isGRES && IsGPU(gres):
			n, err := count(v)
			if err != nil {
				return TRES{}, fmt.Errorf("%s: %w", k, err)
			}
			gpus.Add(gres, n)
		}
	}
	t.GPUs = gpus.Total()
	return t, nil
}

// GPUTally counts a job's GPUs from its GRES entries, as sacct and squeue
// write them as text (gres/gpu=2, gres/gpu:a100=2) and as JSON (type
// "gres", name "gpu" or "gpu:a100"): the plain gpu count when there is
// one, else the typed counts summed.
type GPUTally struct{ plain, typed int64 }

// IsGPU says whether a GRES name counts GPUs: "gpu" or "gpu:TYPE".
func IsGPU(name string) bool { return name == "gpu" || strings.HasPrefix(name, "gpu:") }

// Add counts n GPUs of GRES name (IsGPU).
func (g *GPUTally) Add(name string, n int64) {
	if name == "gpu" {
		g.plain = n
	} else {
		g.typed = min(g.typed+n, maxCount)
	}
}

// Total is the GPUs counted.
func (g *GPUTally) Total() int64 {
	if g.plain != 0 {
		return g.plain
	}
	return g.typed
}

func count(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(s, "-"):
		return 0, errNegative
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%w (over %d)", errTooLarge, maxCount)
	case err != nil:
		return 0, errNotNumber
	case v < 0:
		return 0, errNegative
	case v > maxCount:
		return 0, fmt.Errorf("%w (over %d)", errTooLarge, maxCount)
	}
	return v, nil
}

// ParseBytes reads a memory size: a number with an optional K, M, G, T or
// P suffix (binary units, as Slurm means them); no suffix is MiB.
func ParseBytes(s string) (int64, error) {
	unit := float64(1 << 20)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			unit, s = 1<<10, s[:n-1]
		case 'M':
			unit, s = 1<<20, s[:n-1]
		case 'G':
			unit, s = 1<<30, s[:n-1]
		case 'T':
			unit, s = 1<<40, s[:n-1]
		case 'P':
			unit, s = 1<<50, s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v):
		return 0, errNotNumber
	case v < 0:
		return 0, errNegative
	case v*unit > maxBytes:
		return 0, errTooLarge
	}
	return int64(v * unit), nil
}

// Number reads a number of Slurm's JSON written plain (data parser
// v0.0.38 and before) or as {"set": bool, "infinite": bool, "number": n}
// (v0.0.39 on); ok is false for an absent, null, unset or infinite one.
func Number(raw json.RawMessage) (v float64, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	if raw[0] == '{' {
		var o struct {
			Set      *bool    `json:"set"`
			Infinite bool     `json:"infinite"`
			Number   *float64 `json:"number"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return 0, false, err
		}
		if (o.Set != nil && !*o.Set) || o.Infinite || o.Number == nil {
			return 0, false, nil
		}
		return *o.Number, true, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, errors.New("not a finite number")
	}
	return v, true, nil
}

// States reads a state written as a string ("PENDING", 22.05's squeue;
// "idle", its sinfo) or a list (["PENDING"], ["IDLE", "POWERED_DOWN"],
// v0.0.39 on), upper-cased.
func States(raw json.RawMessage) ([]string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{strings.ToUpper(s)}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a state: a string or a list of strings")
	}
	for i := range list {
		list[i] = strings.ToUpper(list[i])
	}
	return list, nil
}

// ParseDuration reads a Slurm time, as elapsed times and limits are
// written: minutes, minutes:seconds, hours:minutes:seconds,
// days-hours, days-hours:minutes or days-hours:minutes:seconds; seconds
// may carry a fraction. Empty is zero; the most is 50 years.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	bad := errors.New("not a Slurm duration (MM, MM:SS, HH:MM:SS, DD-HH, DD-HH:MM or DD-HH:MM:SS)")
	days, rest, hasDays := strings.Cut(s, "-")
	if !hasDays {
		days, rest = "0", s
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, bad
	}
	// The units of the parts, from the first: with days, hours come first;
	// without, one part is minutes and two are minutes and seconds.
	units := map[bool][][]float64{
		true:  {{3600}, {3600, 60}, {3600, 60, 1}},
		false: {{60}, {60, 1}, {3600, 60, 1}},
	}[hasDays][len(parts)-1]
	d, err := strconv.ParseInt(days, 10, 64)
	if err != nil || d < 0 {
		return 0, bad
	}
	total := float64(d) * 86400
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		last := i == len(parts)-1 && units[i] == 1
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || (!last && v != math.Trunc(v)) || strings.ContainsAny(p, "eE+-xXpP_") {
			return 0, bad
		}
		total += v * units[i]
	}
	if total > maxDays*86400 {
		return 0, fmt.Errorf("%w (over 50 years)", errTooLarge)
	}
	whole := math.Trunc(total) // whole and fractional seconds apart: exact to the nanosecond
	return time.Duration(whole)*time.Second + time.Duration(math.Round((total-whole)*1e9)), nil
}
