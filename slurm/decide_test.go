package slurm_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/slurm"
)

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func node(name string, gpus int64, states ...string) slurm.Node {
	return slurm.Node{Name: name, GPUs: gpus, CPUs: 16, States: states, Partitions: []string{"gpu"}}
}

func pending(id string, gpus int64, limit time.Duration, prio int64) slurm.Job {
	return slurm.Job{ID: id, User: "u", Partition: "gpu", State: "PENDING", Reason: "Resources", GPUs: gpus,
		CPUs: 1, TimeLimit: limit, Priority: prio, Submit: t0.Add(-time.Hour)}
}

func running(id string, gpus int64, limit, ran time.Duration) slurm.Job {
	return slurm.Job{ID: id, User: "u", Partition: "gpu", State: "RUNNING", GPUs: gpus, CPUs: 1, TimeLimit: limit,
		Start: t0.Add(-ran), Submit: t0.Add(-ran - time.Minute)}
}

func TestAdvisePredictsStartsInPriorityOrder(t *testing.T) {
	snap := slurm.Snapshot{Now: t0, Nodes: []slurm.Node{node("n1", 4, "MIXED")}, Jobs: []slurm.Job{
		running("r", 4, 10*time.Hour, time.Hour), // expected to end in 1h (forecast 2h)
		pending("a", 4, 8*time.Hour, 10),
		pending("b", 2, 8*time.Hour, 20), // higher priority: first
		pending("c", 2, 8*time.Hour, 5),
		pending("huge", 8, time.Hour, 30),
	}}
	est := map[string]slurm.Estimate{
		"r": {RunP50: 2 * time.Hour}, "a": {RunP50: 3 * time.Hour, Limit: 4 * time.Hour},
		"b": {RunP50: time.Hour, Limit: 2 * time.Hour}, "c": {RunP50: 30 * time.Minute, Limit: time.Hour},
	}
	adv := slurm.Advise(snap, est)
	got := map[string]slurm.Advice{}
	var order []string
	for _, a := range adv {
		got[a.Job] = a
		order = append(order, a.Job)
	}
	if want := []string{"huge", "b", "a", "c"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for _, c := range []struct {
		job        string
		start, end time.Duration // from now
	}{
		{"b", time.Hour, 2 * time.Hour},
		{"a", 2 * time.Hour, 5 * time.Hour}, // needs all four: after b
		{"c", time.Hour, 90 * time.Minute},  // backfilled beside b
	} {
		a := got[c.job]
		if a.Start != t0.Add(c.start) || a.End != t0.Add(c.end) {
			t.Errorf("%s: start %s end %s, want +%s +%s", c.job, a.Start.Sub(t0), a.End.Sub(t0), c.start, c.end)
		}
	}
	if h := got["huge"]; !h.Start.IsZero() || h.Reason == "" {
		t.Errorf("huge: %+v", h)
	}
}

func TestAdviseTakesTheFirstPartitionToFit(t *testing.T) {
	debug := node("d1", 2, "IDLE")
	debug.Partitions = []string{"debug"}
	j := pending("1", 2, time.Hour, 1)
	j.Partition = "gpu,debug"
	snap := slurm.Snapshot{Now: t0, Nodes: []slurm.Node{node("n1", 4, "ALLOCATED"), debug},
		Jobs: []slurm.Job{running("r", 4, 10*time.Hour, time.Hour), j}}
	adv := slurm.Advise(snap, map[string]slurm.Estimate{"r": {RunP50: 5 * time.Hour}, "1": {RunP50: time.Hour}})
	if len(adv) != 1 || adv[0].Start != t0 {
		t.Fatalf("advice %+v: want a start now, in debug", adv)
	}
}

// A pending array's tasks take the GPUs in turn, at most MaxTasks at once.
func TestAdvisePlansAnArraysTasks(t *testing.T) {
	for _, c := range []struct {
		max int
		end time.Duration
	}{{0, 2 * time.Hour}, {1, 4 * time.Hour}} {
		arr := pending("1", 2, 2*time.Hour, 1)
		arr.Tasks, arr.MaxTasks = 4, c.max
		snap := slurm.Snapshot{Now: t0, Nodes: []slurm.Node{node("n1", 4, "IDLE")}, Jobs: []slurm.Job{arr}}
		adv := slurm.Advise(snap, map[string]slurm.Estimate{"1": {RunP50: time.Hour}})
		if len(adv) != 1 || adv[0].Tasks != 4 || adv[0].Start != t0 || adv[0].End != t0.Add(c.end) {
			t.Errorf("at most %d at once: %+v, want the last to end at +%s", c.max, adv, c.end)
		}
	}
}

func TestCommentKeepsWhatIsThere(t *testing.T) {
	a := slurm.Advice{Limit: 30 * time.Minute, UserLimit: 2 * time.Hour, RunP50: 10 * time.Minute, Start: t0}
	note := slurm.Comment(a)
	if note != "[prescient: limit 30m run~10m start~2026-12-07T12:00Z]" {
		t.Fatalf("note %q", note)
	}
	for _, c := range []struct{ existing, want string }{
		{"", note},
		{"site note", "site note " + note},
		{"site note [prescient: limit 60m] more", "site note more " + note},
	} {
		if got := slurm.WithComment(c.existing, note); got != c.want {
			t.Errorf("%q: %q, want %q", c.existing, got, c.want)
		}
	}
	if got := slurm.WithoutComment("x " + note); got != "x" {
		t.Errorf("without: %q", got)
	}
}

func kinds(acts []slurm.Action) []string {
	var out []string
	for _, a := range acts {
		s := fmt.Sprintf("%s %s%s %s", a.Kind, a.Job, a.Node, a.Limit)
		if a.Nice != nil {
			s += fmt.Sprintf(" nice=%d", *a.Nice)
		}
		if !a.Until.IsZero() {
			s += fmt.Sprintf(" until=+%s", a.Until.Sub(t0))
		}
		out = append(out, s)
	}
	return out
}

func TestDecide(t *testing.T) {
	auto := slurm.Config{Autopilot: true, Partitions: []string{"gpu"}, Floor: 5 * time.Minute, ParkIdleAfter: 10 * time.Minute}
	adv := func(job string, limit time.Duration) slurm.Advice { return slurm.Advice{Job: job, Limit: limit} }
	// A week's wait is worth 1,008 points: a point is 10 minutes.
	ages := slurm.Priority{Type: "priority/multifactor", WeightAge: 1008, MaxAge: 7 * 24 * time.Hour}
	order := slurm.Config{Autopilot: true, Order: []string{"gpu"}}
	nice := func(j slurm.Job, n int) slurm.Job { j.Nice = n; return j }
	held := pending("3", 1, time.Hour, 1)
	held.Reason = "JobHeldUser"
	// Holding: flex is the deferrable QOS; the grid is dirty until two
	// hours from now (dirtyNow) or was cleaner an hour ago (cleanNow).
	holder, err := executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, 6*time.Hour, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	holds := slurm.Config{Autopilot: true, HoldQOS: []string{"flex"}, Holder: holder}
	dirtyNow, _ := sim.NewCarbonSeries([]time.Time{t0.Add(-time.Hour), t0.Add(2 * time.Hour)}, []float64{500, 100})
	cleanNow, _ := sim.NewCarbonSeries([]time.Time{t0.Add(-3 * time.Hour), t0.Add(-time.Hour)}, []float64{500, 100})
	marked := func(j slurm.Job, until time.Duration) slurm.Job {
		j.AdminComment = slurm.WithHoldMark("site note", t0.Add(until))
		return j
	}
	flex := func(j slurm.Job, submitted time.Duration, reason string) slurm.Job {
		j.QOS, j.Submit = "flex", t0.Add(-submitted)
		if reason != "" {
			j.Reason = reason
		}
		return j
	}
	for _, c := range []struct {
		name   string
		cfg    slurm.Config
		jobs   []slurm.Job
		nodes  []slurm.Node
		advice []slurm.Advice
		st     slurm.State
		prio   slurm.Priority
		carbon executor.Carbon
		want   []string
	}{
		{name: "deferrable work is held for cleaner power within its wait", cfg: holds, carbon: dirtyNow,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, ""), pending("2", 1, time.Hour, 1),
				flex(pending("3", 1, time.Hour, 1), 5*time.Hour, ""), flex(pending("4", 1, time.Hour, 1), 0, "JobHeldUser")},
			want: []string{"hold 1 0s until=+2h0m0s"}},
		{name: "a held job is released once the cleaner power has come", cfg: holds, carbon: cleanNow,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin")},
			st:   slurm.State{Held: map[string]time.Time{"1": t0}},
			want: []string{"release 1 0s"}},
		{name: "a job it held that someone released is not held again", cfg: holds, carbon: dirtyNow,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, "")},
			st:   slurm.State{Held: map[string]time.Time{"1": t0.Add(2 * time.Hour)}}},
		{name: "a held job stays held while the cleaner power is ahead", cfg: holds, carbon: dirtyNow,
			jobs: []slurm.Job{marked(flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), 2*time.Hour)},
			st:   slurm.State{Held: map[string]time.Time{"1": t0.Add(2 * time.Hour)}}},
		{name: "a held job's mark follows its end when it moves later, or was never set", cfg: holds, carbon: dirtyNow,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"),
				marked(flex(pending("2", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), time.Hour),
				marked(flex(pending("3", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), 3*time.Hour)},
			st:   slurm.State{Held: map[string]time.Time{"1": t0.Add(2 * time.Hour), "2": t0.Add(time.Hour), "3": t0.Add(3 * time.Hour)}},
			want: []string{"hold 1 0s until=+2h0m0s", "hold 2 0s until=+2h0m0s"}},
		{name: "a hold whose state is lost is found by its mark, and released when it is over", cfg: holds, carbon: cleanNow,
			jobs: []slurm.Job{marked(flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), -time.Hour),
				marked(flex(pending("2", 1, time.Hour, 1), time.Hour, ""), -time.Hour)},
			advice: []slurm.Advice{adv("1", time.Hour), adv("2", time.Hour)},
			want:   []string{"comment 2 0s", "release 1 0s"}},
		{name: "without the grid's intensity nothing is held and a held job is released", cfg: holds,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), flex(pending("2", 1, time.Hour, 1), time.Hour, "")},
			st:   slurm.State{Held: map[string]time.Time{"1": t0.Add(2 * time.Hour)}},
			want: []string{"release 1 0s"}},
		{name: "turned off, a held job is released; one another held is left alone", cfg: slurm.Config{}, carbon: dirtyNow,
			jobs: []slurm.Job{flex(pending("1", 1, time.Hour, 1), time.Hour, "JobHeldAdmin"), flex(pending("2", 1, time.Hour, 1), time.Hour, "JobHeldUser")},
			st:   slurm.State{Held: map[string]time.Time{"1": t0.Add(2 * time.Hour)}},
			want: []string{"release 1 0s"}},
		{name: "ordering sets Nice by the estimate: the recommended limit, at most the user's", cfg: order, prio: ages,
			jobs:   []slurm.Job{pending("1", 1, 10*time.Hour, 1), pending("2", 1, time.Hour, 1), pending("4", 1, 0, 1)},
			advice: []slurm.Advice{adv("1", 2*time.Hour), adv("2", 3*time.Hour), adv("4", 0)},
			want:   []string{"nice 1 0s nice=-996", "nice 2 0s nice=-1002"}},
		{name: "ordering adds to the user's Nice, and leaves a job at its target and a held one", cfg: order, prio: ages,
			jobs:   []slurm.Job{nice(pending("1", 1, time.Hour, 1), 100), nice(pending("2", 1, time.Hour, 1), -1002), nice(held, 5)},
			st:     slurm.State{Niced: map[string]slurm.Niced{"2": {UserNice: 0, Set: -1002}}},
			advice: []slurm.Advice{adv("1", time.Hour), adv("2", time.Hour), adv("3", time.Hour)},
			want:   []string{"nice 1 0s nice=-902"}},
		{name: "a Nice its user changed since it was ordered is the user's now", cfg: order, prio: ages,
			jobs:   []slurm.Job{nice(pending("1", 1, time.Hour, 1), 10)},
			st:     slurm.State{Niced: map[string]slurm.Niced{"1": {UserNice: 0, Set: -1002}}},
			advice: []slurm.Advice{adv("1", time.Hour)},
			want:   []string{"nice 1 0s nice=-992"}},
		{name: "an ordered job's Nice moves only when its estimate moved by over a tenth", cfg: order, prio: ages,
			jobs:   []slurm.Job{nice(pending("1", 1, 24*time.Hour, 1), -948), nice(pending("2", 1, 24*time.Hour, 1), -948)},
			st:     slurm.State{Niced: map[string]slurm.Niced{"1": {Set: -948}, "2": {Set: -948}}}, // set for 10h
			advice: []slurm.Advice{adv("1", 10*time.Hour+30*time.Minute), adv("2", 12*time.Hour)},
			want:   []string{"nice 2 0s nice=-936"}},
		{name: "ordering needs priorities that grow with age", cfg: order, prio: slurm.Priority{Type: "priority/basic"},
			jobs: []slurm.Job{pending("1", 1, time.Hour, 1)}, advice: []slurm.Advice{adv("1", time.Hour)}},
		{name: "advisor orders nothing", cfg: slurm.Config{Order: []string{"gpu"}}, prio: ages,
			jobs: []slurm.Job{pending("1", 1, time.Hour, 1)}, advice: []slurm.Advice{adv("1", time.Hour)}},
		{name: "turned off, an ordered job gets its user's Nice back", cfg: slurm.Config{}, prio: ages,
			jobs: []slurm.Job{nice(pending("1", 1, time.Hour, 1), -900), nice(running("2", 1, time.Hour, time.Minute), -900)},
			st:   slurm.State{Niced: map[string]slurm.Niced{"1": {UserNice: 7, Set: -900}, "2": {Set: -900}, "gone": {}}},
			want: []string{"restore_nice 1 0s nice=7", "restore_nice 2 0s nice=0"}},
		{name: "advisor lowers nothing", cfg: slurm.Config{}, jobs: []slurm.Job{pending("1", 1, time.Hour, 1)},
			advice: []slurm.Advice{adv("1", 10*time.Minute)}},
		{name: "autopilot lowers within its partitions, to the floor at least", cfg: auto,
			jobs: []slurm.Job{pending("1", 1, time.Hour, 1), pending("2", 1, time.Hour, 1), pending("3", 1, time.Hour, 1),
				{ID: "4", Partition: "cpu", State: "PENDING", TimeLimit: time.Hour}},
			advice: []slurm.Advice{adv("1", 10*time.Minute), adv("2", 2*time.Minute), adv("3", 2*time.Hour), adv("4", time.Minute)},
			want:   []string{"lower 1 10m0s", "lower 2 5m0s"}},
		{name: "a lowered job follows the recommendation, back to the user's limit at most", cfg: auto,
			jobs: []slurm.Job{pending("1", 1, 10*time.Minute, 1), pending("2", 1, 10*time.Minute, 1), pending("3", 1, 10*time.Minute, 1)},
			st: slurm.State{Lowered: map[string]slurm.Lowered{"1": {UserLimit: time.Hour}, "2": {UserLimit: time.Hour},
				"3": {UserLimit: time.Hour}}},
			advice: []slurm.Advice{adv("1", 20*time.Minute), adv("2", 3*time.Hour), adv("3", 10*time.Minute)},
			want:   []string{"lower 1 20m0s", "restore 2 1h0m0s"}},
		{name: "a job that may run outside the partitions autopilot touches keeps its limit", cfg: auto,
			jobs:   []slurm.Job{{ID: "1", Partition: "gpu,cpu", State: "PENDING", TimeLimit: time.Hour}},
			advice: []slurm.Advice{adv("1", 10*time.Minute)}},
		{name: "turned off, a lowered pending job gets its limit back", cfg: slurm.Config{},
			jobs: []slurm.Job{pending("1", 1, 10*time.Minute, 1)},
			st:   slurm.State{Lowered: map[string]slurm.Lowered{"1": {UserLimit: time.Hour, Set: 10 * time.Minute}}},
			want: []string{"restore 1 1h0m0s"}},
		{name: "turned off, a lowered running job gets its limit back", cfg: slurm.Config{},
			jobs: []slurm.Job{running("1", 1, 10*time.Minute, time.Minute)},
			st:   slurm.State{Lowered: map[string]slurm.Lowered{"1": {UserLimit: time.Hour}}},
			want: []string{"restore 1 1h0m0s"}},
		{name: "a running job near its lowered limit gets its own back", cfg: auto,
			jobs: []slurm.Job{running("1", 1, 10*time.Minute, 9*time.Minute), running("2", 1, 10*time.Minute, 5*time.Minute)},
			st:   slurm.State{Lowered: map[string]slurm.Lowered{"1": {UserLimit: time.Hour}, "2": {UserLimit: time.Hour}}},
			want: []string{"restore 1 1h0m0s"}},
		{name: "an idle node is parked once idle long enough with nothing pending", cfg: auto,
			nodes: []slurm.Node{node("n1", 4, "IDLE"), node("n2", 4, "IDLE")},
			st:    slurm.State{IdleSince: map[string]time.Time{"n1": t0.Add(-11 * time.Minute), "n2": t0.Add(-5 * time.Minute)}},
			want:  []string{"power_down n1 0s"}},
		{name: "nothing is parked while a job pends in its partition", cfg: auto,
			nodes: []slurm.Node{node("n1", 4, "IDLE")}, jobs: []slurm.Job{pending("1", 8, time.Hour, 1)},
			st:   slurm.State{IdleSince: map[string]time.Time{"n1": t0.Add(-time.Hour)}},
			want: nil},
		{name: "nothing is parked while a job pends in any of its partitions", cfg: auto,
			nodes: []slurm.Node{node("n1", 4, "IDLE")}, jobs: []slurm.Job{{ID: "1", Partition: "debug,gpu", State: "PENDING", Reason: "Priority"}},
			st:   slurm.State{IdleSince: map[string]time.Time{"n1": t0.Add(-time.Hour)}},
			want: nil},
		{name: "a node it parked wakes for a pending job; another's is left alone", cfg: auto,
			nodes: []slurm.Node{node("n1", 4, "IDLE", "POWERED_DOWN"), node("n2", 4, "IDLE", "POWERED_DOWN")},
			jobs:  []slurm.Job{pending("1", 8, time.Hour, 1)},
			st:    slurm.State{Parked: map[string]time.Time{"n1": t0.Add(-time.Hour)}},
			want:  []string{"power_up n1 0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := slurm.Snapshot{Now: t0, Jobs: c.jobs, Nodes: c.nodes, Priority: c.prio, Carbon: c.carbon}
			c.st.Observe(slurm.Snapshot{Now: t0, Jobs: c.jobs, Nodes: c.nodes})
			got := kinds(slurm.Decide(c.cfg, snap, c.advice, &c.st))
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// Advice reads back as the API writes it.
func TestAdviceJSONRoundTrip(t *testing.T) {
	a := slurm.Advice{Job: "7", Name: "x", User: "u", Partition: "gpu", GPUs: 2, Tasks: 1, UserLimit: time.Hour,
		Limit: 10 * time.Minute, RunP50: 4 * time.Minute, Start: t0, End: t0.Add(4 * time.Minute), Reason: "r"}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back slurm.Advice
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, a) || !strings.Contains(string(b), `"lowers":true`) {
		t.Errorf("%s read back as %+v (%v)", b, back, err)
	}
}

func TestNoteChangedOnlyWhenItSaysSomethingElse(t *testing.T) {
	a := slurm.Advice{Limit: 30 * time.Minute, UserLimit: 2 * time.Hour, RunP50: 10 * time.Minute, Start: t0.Add(4 * time.Hour)}
	comment := "site " + slurm.Comment(a)
	for _, c := range []struct {
		name string
		edit func(*slurm.Advice)
		want bool
	}{
		{"the same", func(*slurm.Advice) {}, false},
		{"start moved 20 minutes of 4 hours", func(a *slurm.Advice) { a.Start = a.Start.Add(20 * time.Minute) }, false},
		{"start moved 2 hours", func(a *slurm.Advice) { a.Start = a.Start.Add(-2 * time.Hour) }, true},
		{"another limit", func(a *slurm.Advice) { a.Limit = 40 * time.Minute }, true},
		{"start beyond the horizon", func(a *slurm.Advice) { a.Start, a.StartAfter = time.Time{}, t0.Add(slurm.Horizon) }, true},
	} {
		b := a
		c.edit(&b)
		if got := slurm.NoteChanged(comment, b, t0); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if !slurm.NoteChanged("site", a, t0) {
		t.Error("no note yet: must comment")
	}
}

func TestRestoreUndoesEverything(t *testing.T) {
	st := slurm.State{Lowered: map[string]slurm.Lowered{"1": {UserLimit: time.Hour}, "2": {UserLimit: 2 * time.Hour}, "gone": {}},
		Niced: map[string]slurm.Niced{"1": {UserNice: 3}, "gone": {}}, Held: map[string]time.Time{"3": t0, "4": t0},
		Parked: map[string]time.Time{"n1": t0}}
	held := pending("3", 1, time.Minute, 1)
	held.Reason = "JobHeldAdmin"
	snap := slurm.Snapshot{Now: t0, Jobs: []slurm.Job{pending("1", 1, time.Minute, 1), running("2", 1, time.Minute, 0), held, pending("4", 1, time.Minute, 1)},
		Nodes: []slurm.Node{node("n1", 4, "IDLE", "POWERED_DOWN")}}
	st.Observe(snap)
	got := kinds(slurm.Restore(snap, &st))
	if want := []string{"restore 1 1h0m0s", "restore 2 2h0m0s", "restore_nice 1 0s nice=3", "release 3 0s", "power_up n1 0s"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
