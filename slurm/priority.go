package slurm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Priority is how Slurm weighs a pending job's age (scontrol show
// config): what a Nice value is worth in waiting time. With
// priority/multifactor a job's priority gains WeightAge points over
// MaxAge of waiting and loses its Nice.
type Priority struct {
	Type      string        // PriorityType: priority/multifactor, priority/basic
	WeightAge int64         // PriorityWeightAge, 0 to 2^32−1
	MaxAge    time.Duration // PriorityMaxAge
}

// ErrNoAgeFactor is returned when Nice cannot order jobs by waiting time:
// the cluster's priority plugin is not multifactor, or it gives age no
// weight.
var ErrNoAgeFactor = errors.New("Nice cannot order jobs: priorities do not grow with age (PriorityType=priority/multifactor, PriorityWeightAge and PriorityMaxAge above 0 are needed)")

// Ages says whether a job's priority grows with its age, so that a Nice
// is worth a wait: ErrNoAgeFactor if not.
func (p Priority) Ages() error {
	if p.Type != "priority/multifactor" || p.WeightAge <= 0 || p.MaxAge <= 0 {
		return fmt.Errorf("slurm: ordering through Nice: PriorityType %q, PriorityWeightAge %d, PriorityMaxAge %s: %w",
			p.Type, p.WeightAge, p.MaxAge, ErrNoAgeFactor)
	}
	return nil
}

// Points is what a wait of d is worth in age-factor points (rounded
// down, at most maxNice). It needs p.Ages() to hold.
func (p Priority) Points(d time.Duration) int {
	return int(math.Min(math.Floor(p.worth(max(d, 0))), maxNice))
}

// worth is a wait of d in age-factor points, unrounded.
func (p Priority) worth(d time.Duration) float64 {
	return d.Seconds() * float64(p.WeightAge) / p.MaxAge.Seconds()
}

// HeadStartCap is the longest estimate HeadStartNice tells apart: a
// job of a week or longer gets no head start.
const HeadStartCap = 7 * 24 * time.Hour

// HeadStartNice is the Nice that queues a pending job estimated to run
// est as if it had come HeadStartCap − est earlier (never negative): in
// age points, so that Slurm orders jobs of one partition by submit time
// plus estimate, the order of the headstart-backfill policy (package
// executor/plugins/headstart), for as long as their age has not reached
// MaxAge. It is zero or negative: raising priorities, never lowering them
// below 1, where Slurm would stop telling them apart. It needs
// p.Ages() to hold.
func (p Priority) HeadStartNice(est time.Duration) int {
	head := HeadStartCap - min(max(est, 0), HeadStartCap)
	return -int(math.Min(math.Round(p.worth(head)), maxNice))
}

// maxNice is the largest Nice Slurm takes, either way (NICE_OFFSET − 3).
const maxNice = 1<<31 - 3

func clampNice(n int) int { return min(max(n, -maxNice), maxNice) }

// ParsePriority reads the priority settings from the text of scontrol
// show config ("Name = value" lines); a setting it lacks stays zero.
func ParsePriority(r io.Reader) (Priority, error) {
	var p Priority
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		name, value, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		var err error
		switch name {
		case "PriorityType":
			p.Type = value
		case "PriorityWeightAge":
			var w uint64
			w, err = strconv.ParseUint(value, 10, 32) // a uint32 in Slurm
			p.WeightAge = int64(w)
		case "PriorityMaxAge":
			p.MaxAge, err = ParseDuration(value)
		}
		if err != nil {
			return Priority{}, fmt.Errorf("slurm: scontrol show config line %d: %s %q: %w", line, name, value, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Priority{}, fmt.Errorf("slurm: scontrol show config: %w", err)
	}
	return p, nil
}
