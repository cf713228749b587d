package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/slurm"
)

// TestMarkKeepsWhatIsThere: the mark of a user's limit replaces an earlier
// one and leaves the site's text and the advice note alone; a comment
// without one, or with a broken one, has none.
func TestMarkKeepsWhatIsThere(t *testing.T) {
	for _, c := range []struct {
		existing, want string
	}{
		{"", "[prescient-user-limit: 120m]"},
		{"site note", "site note [prescient-user-limit: 120m]"},
		{"site note [prescient-user-limit: 30m] [prescient: run~2m]", "site note [prescient: run~2m] [prescient-user-limit: 120m]"},
		{"[prescient-user-limit: 30m] site note", "site note [prescient-user-limit: 120m]"},
	} {
		got := slurm.WithMark(c.existing, 2*time.Hour)
		if got != c.want {
			t.Errorf("WithMark(%q) = %q, want %q", c.existing, got, c.want)
		}
		if l, ok := slurm.MarkedLimit(got); !ok || l != 2*time.Hour {
			t.Errorf("MarkedLimit(%q) = %s %v", got, l, ok)
		}
		if w := slurm.WithComment(got, "[prescient: limit 5m]"); !strings.Contains(w, "[prescient-user-limit: 120m]") {
			t.Errorf("the note took the mark: %q", w)
		}
	}
	for _, c := range []string{"", "site note", "[prescient-user-limit: ]", "[prescient-user-limit: 0m]", "[prescient: limit 5m]"} {
		if l, ok := slurm.MarkedLimit(c); ok {
			t.Errorf("MarkedLimit(%q) = %s", c, l)
		}
	}
}

// TestDecideMarksTheFirstLower: lowering a job that carries no mark of
// its user's limit sets the mark in the same call, after the note; a job
// marked already is lowered with its limit alone (so lowers of one value
// go in one call).
func TestDecideMarksTheFirstLower(t *testing.T) {
	cfg := slurm.Config{Autopilot: true, Comment: true, Partitions: []string{"gpu"}, Floor: time.Minute}
	fresh, marked := pending("1", 1, 2*time.Hour, 1), pending("2", 1, 2*time.Hour, 1)
	fresh.AdminComment, marked.AdminComment = "site note", "site note "+slurm.Mark(2*time.Hour)
	snap := slurm.Snapshot{Now: t0, Jobs: []slurm.Job{fresh, marked}, Nodes: []slurm.Node{node("n1", 4, "ALLOCATED")}}
	advice := []slurm.Advice{{Job: "1", Limit: 5 * time.Minute, Start: t0.Add(time.Hour)}, {Job: "2", Limit: 5 * time.Minute, Start: t0.Add(time.Hour)}}
	acts := slurm.Decide(cfg, snap, advice, &slurm.State{})
	var got []string
	for _, a := range acts {
		got = append(got, fmt.Sprintf("%s %s %q", a.Kind, a.Job, a.Text))
	}
	want := []string{
		`comment 1 "site note [prescient: limit 5m start~2026-12-07T13:00Z]"`,
		`lower 1 "site note [prescient: limit 5m start~2026-12-07T13:00Z] [prescient-user-limit: 120m]"`,
		`comment 2 "site note [prescient-user-limit: 120m] [prescient: limit 5m start~2026-12-07T13:00Z]"`,
		`lower 2 ""`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions\n%s\nwant\n%s", got, want)
	}
}

// TestGuardGivesBackFromSlurmAlone: with no Prescient and no state, the
// guard gives a running job its marked limit back once it has run to
// within RestoreMargin of the lowered one, in one call, and leaves alone
// a job not near its limit, a pending one, one whose limit is its marked
// one (given back already) and one without a mark.
func TestGuardGivesBackFromSlurmAlone(t *testing.T) {
	mark := slurm.Mark(2 * time.Hour)
	withMark := func(j slurm.Job) slurm.Job { j.AdminComment = "note " + mark; return j }
	c := &fakeClient{jobs: []slurm.Job{
		withMark(running("near", 1, 10*time.Minute, 8*time.Minute)), // within two minutes of 10m
		withMark(running("early", 1, 10*time.Minute, 7*time.Minute)),
		withMark(pending("pend", 1, 10*time.Minute, 1)),
		withMark(running("back", 1, 2*time.Hour, 119*time.Minute)),
		running("plain", 1, 10*time.Minute, 9*time.Minute),
	}}
	done, err := slurm.RunGuard(context.Background(), c, t0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || len(done) != 1 || done[0].Job != "near" || done[0].Limit != 2*time.Hour {
		t.Fatalf("guard: %+v, %v", done, err)
	}
	for _, j := range c.jobs {
		if j.ID == "near" && j.AdminComment != "note" {
			t.Errorf("given back, its comment %q still carries the mark", j.AdminComment)
		}
		want := map[string]time.Duration{"near": 2 * time.Hour, "back": 2 * time.Hour}[j.ID]
		if want == 0 {
			want = 10 * time.Minute
		}
		if j.TimeLimit != want {
			t.Errorf("job %s: limit %s, want %s", j.ID, j.TimeLimit, want)
		}
	}
	// Run again: nothing left to give back.
	if done, err := slurm.RunGuard(context.Background(), c, t0, slog.New(slog.NewTextHandler(io.Discard, nil))); len(done) != 0 || err != nil {
		t.Errorf("second guard: %+v %v", done, err)
	}
}

// FuzzMarkedLimit: any AdminComment reads without a panic; marking it
// gives a comment that reads as the marked limit, keeps the rest of the
// text, and marking it again changes nothing.
func FuzzMarkedLimit(f *testing.F) {
	for _, s := range []string{"", "site note", "[prescient-user-limit: 30m]", "a [prescient: limit 5m] [prescient-user-limit: 99999999999999999999m]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comment string) {
		slurm.MarkedLimit(comment)
		marked := slurm.WithMark(comment, 90*time.Minute)
		if l, ok := slurm.MarkedLimit(marked); !ok || l != 90*time.Minute {
			t.Fatalf("WithMark(%q) = %q reads %s %v", comment, marked, l, ok)
		}
		if again := slurm.WithMark(marked, 90*time.Minute); again != marked {
			t.Fatalf("marking twice: %q then %q", marked, again)
		}
	})
}

// TestRestoresTakeTheMarkOff: every restore of a marked job takes its mark
// off in the same call, keeping the rest of the comment; and a Prescient
// that lost its state adopts a job whose mark records a limit above its
// own, so that turning autopilot off gives the marked limit back.
func TestRestoresTakeTheMarkOff(t *testing.T) {
	lowered := pending("1", 1, 5*time.Minute, 1)
	lowered.AdminComment = "site note " + slurm.Mark(2*time.Hour)
	near := running("2", 1, 5*time.Minute, 4*time.Minute)
	near.AdminComment = slurm.Mark(time.Hour)
	snap := slurm.Snapshot{Now: t0, Jobs: []slurm.Job{lowered, near}, Nodes: []slurm.Node{node("n1", 4, "ALLOCATED")}}
	st := &slurm.State{} // lost
	st.Observe(snap)
	if l := st.Lowered["1"]; l.UserLimit != 2*time.Hour || l.Set != 5*time.Minute {
		t.Fatalf("adopted %+v, want the user's 2h and the 5m set", st.Lowered)
	}
	acts := slurm.Decide(slurm.Config{}, snap, nil, st) // autopilot off
	var got []string
	for _, a := range acts {
		got = append(got, fmt.Sprintf("%s %s %s %v %q", a.Kind, a.Job, a.Limit, a.Unmark, a.Text))
	}
	want := []string{`restore 1 2h0m0s true "site note"`, `restore 2 1h0m0s true ""`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	for _, j := range stopWithLostState(t, snap.Jobs) {
		if _, marked := slurm.MarkedLimit(j.AdminComment); marked || j.TimeLimit < time.Hour {
			t.Errorf("after Stop with a lost state: job %s has limit %s and comment %q", j.ID, j.TimeLimit, j.AdminComment)
		}
	}
}

// TestHoldMarks: a hold marks the comment after the cycle's note, in the
// order the Runner makes them; a release takes the mark off and leaves
// the rest; the guard releases an operator's hold only once its marked
// end is GuardHoldGrace past, and never a user's own hold.
func TestHoldMarks(t *testing.T) {
	holder, err := executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, 6*time.Hour, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := slurm.Config{Autopilot: true, Comment: true, HoldQOS: []string{"flex"}, Holder: holder}
	dirty, _ := sim.NewCarbonSeries([]time.Time{t0.Add(-time.Hour), t0.Add(2 * time.Hour)}, []float64{500, 100})
	clean, _ := sim.NewCarbonSeries([]time.Time{t0.Add(-time.Hour)}, []float64{100})
	j := pending("1", 1, time.Hour, 1)
	j.QOS, j.Submit, j.AdminComment = "flex", t0.Add(-time.Minute), "site note"
	advice := []slurm.Advice{{Job: "1", Limit: 30 * time.Minute, Start: t0.Add(time.Hour)}}
	st := slurm.State{}
	acts := slurm.Decide(cfg, slurm.Snapshot{Now: t0, Jobs: []slurm.Job{j}, Carbon: dirty}, advice, &st)
	if len(acts) != 2 || acts[0].Kind != slurm.ActComment || acts[1].Kind != slurm.ActHold ||
		acts[1].Text != slurm.WithHoldMark(acts[0].Text, t0.Add(2*time.Hour)) || !strings.HasPrefix(acts[0].Text, "site note [prescient:") {
		t.Fatalf("hold: %+v", acts)
	}
	j.AdminComment, j.Reason = acts[1].Text, "JobHeldAdmin"
	st.Held = map[string]time.Time{"1": t0.Add(2 * time.Hour)}
	acts = slurm.Decide(cfg, slurm.Snapshot{Now: t0, Jobs: []slurm.Job{j}, Carbon: clean}, advice, &st)
	if len(acts) != 1 || acts[0].Kind != slurm.ActRelease || !acts[0].Unmark || acts[0].Text != slurm.WithoutHoldMark(j.AdminComment) ||
		strings.Contains(acts[0].Text, "held-until") || !strings.HasPrefix(acts[0].Text, "site note [prescient:") {
		t.Fatalf("release: %+v", acts)
	}

	user := j
	user.ID, user.Reason = "2", "JobHeldUser"
	for _, c := range []struct {
		after time.Duration
		want  int
	}{{0, 0}, {slurm.GuardHoldGrace, 0}, {slurm.GuardHoldGrace + time.Minute, 1}} {
		got := slurm.Guard(slurm.Snapshot{Now: t0.Add(2*time.Hour + c.after), Jobs: []slurm.Job{j, user}})
		if len(got) != c.want || (c.want == 1 && (got[0].Kind != slurm.ActRelease || got[0].Job != "1" || got[0].Text != slurm.WithoutHoldMark(j.AdminComment))) {
			t.Errorf("guard %s past the mark: %+v", c.after, got)
		}
	}
}

// FuzzMarkedHold: any AdminComment reads without a panic; marking it
// reads back the time marked, to the second, and unmarking leaves no mark.
func FuzzMarkedHold(f *testing.F) {
	f.Add("site note [prescient-held-until: 2026-12-07T18:00:00Z]")
	f.Add("[prescient-held-until: 2026-13-45T99:00:00Z]")
	f.Add("")
	f.Fuzz(func(t *testing.T, comment string) {
		slurm.MarkedHold(comment)
		until := time.Date(2026, 12, 7, 18, 0, 1, 500, time.UTC)
		got, ok := slurm.MarkedHold(slurm.WithHoldMark(comment, until))
		if !ok || !got.Equal(until.Truncate(time.Second)) {
			t.Fatalf("marked %q: %s %v", comment, got, ok)
		}
		if _, ok := slurm.MarkedHold(slurm.WithoutHoldMark(slurm.WithHoldMark(comment, until))); ok && !strings.Contains(slurm.WithoutHoldMark(comment), "[prescient-held-until:") {
			t.Fatalf("unmarked %q still marked", comment)
		}
	})
}

// TestNiceMarks: the first Nice set on a job marks its user's Nice in its
// comment, in the same call, and a Nice that follows a moved estimate
// keeps the mark (a batch); a Prescient that lost its state adopts a job
// whose Nice is not its mark's, orders it from the marked Nice (not on
// top of the one set, as it would a job without a mark), and Stop gives that back with the mark taken off.
// A job whose Nice is its mark's again is not adopted.
func TestNiceMarks(t *testing.T) {
	ages := slurm.Priority{Type: "priority/multifactor", WeightAge: 1008, MaxAge: 7 * 24 * time.Hour}
	order := slurm.Config{Autopilot: true, Order: []string{"gpu"}}
	withNice := func(j slurm.Job, nice int, comment string) slurm.Job {
		j.Nice, j.AdminComment = nice, comment
		return j
	}
	fresh := withNice(pending("1", 1, time.Hour, 1), 5, "site note")
	moved := withNice(pending("2", 1, 24*time.Hour, 1), -943, "site note "+slurm.NiceMark(5)) // set for a 10h estimate
	snap := slurm.Snapshot{Now: t0, Jobs: []slurm.Job{fresh, moved}, Priority: ages}
	st := &slurm.State{Niced: map[string]slurm.Niced{"2": {UserNice: 5, Set: -943}}}
	st.Observe(snap)
	advice := []slurm.Advice{{Job: "1", Limit: time.Hour}, {Job: "2", Limit: 12 * time.Hour}}
	var got []string
	for _, a := range slurm.Decide(order, snap, advice, st) {
		got = append(got, fmt.Sprintf("%s %s nice=%d %v %q", a.Kind, a.Job, *a.Nice, a.Unmark, a.Text))
	}
	want := []string{`nice 1 nice=-997 false "site note [prescient-user-nice: 5]"`, `nice 2 nice=-931 false ""`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions\n%q\nwant\n%q", got, want)
	}

	// The state is lost: job 1 was ordered to -997, job 3's Nice is its
	// mark's again (someone gave it back).
	ordered := withNice(pending("1", 1, time.Hour, 1), -997, "site note "+slurm.NiceMark(5))
	back := withNice(pending("3", 1, time.Hour, 1), 5, slurm.NiceMark(5))
	snap = slurm.Snapshot{Now: t0, Jobs: []slurm.Job{ordered, back}, Priority: ages}
	lost := &slurm.State{}
	lost.Observe(snap)
	if n, ok := lost.Niced["1"]; !ok || n.UserNice != 5 || n.Set != -997 || len(lost.Niced) != 1 {
		t.Fatalf("adopted %+v, want job 1 with the user's 5 and the -997 set", lost.Niced)
	}
	// Job 1 stays at its target, 5 plus the head start of an hour; job 4,
	// set alike but without a mark, reads as its user's own -997.
	unmarked := withNice(pending("4", 1, time.Hour, 1), -997, "site note")
	decide := slurm.Snapshot{Now: t0, Jobs: []slurm.Job{ordered, unmarked}, Priority: ages}
	got = kinds(slurm.Decide(order, decide, []slurm.Advice{{Job: "1", Limit: time.Hour}, {Job: "4", Limit: time.Hour}}, lost))
	if want := []string{"nice 4 0s nice=-1999"}; !slices.Equal(got, want) {
		t.Errorf("ordered after the state was lost: %q, want %q", got, want)
	}
	for _, j := range stopWithLostState(t, snap.Jobs) {
		wantComment := map[string]string{"1": "site note", "3": slurm.NiceMark(5)}[j.ID]
		if j.Nice != 5 || j.AdminComment != wantComment {
			t.Errorf("after Stop with a lost state: job %s has Nice %d and comment %q, want 5 and %q", j.ID, j.Nice, j.AdminComment, wantComment)
		}
	}
}

// FuzzMarkedNice: any AdminComment reads without a panic; marking it gives
// a comment that reads as the marked Nice, and marking it again or taking
// the mark off and putting it back changes nothing.
func FuzzMarkedNice(f *testing.F) {
	for _, s := range []string{"", "site note", "[prescient-user-nice: -5]", "a [prescient-user-nice: 99999999999999999999] [prescient-user-limit: 30m]"} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, comment string, nice int) {
		slurm.MarkedNice(comment)
		nice = max(min(nice, 1<<31-3), -(1<<31 - 3))
		marked := slurm.WithNiceMark(comment, nice)
		if n, ok := slurm.MarkedNice(marked); !ok || n != nice {
			t.Fatalf("WithNiceMark(%q, %d) = %q reads %d %v", comment, nice, marked, n, ok)
		}
		if again := slurm.WithNiceMark(marked, nice); again != marked {
			t.Fatalf("marking twice: %q then %q", marked, again)
		}
		if _, ok := slurm.MarkedNice(slurm.WithoutNiceMark(marked)); ok {
			t.Fatalf("WithoutNiceMark(%q) still marked", marked)
		}
	})
}

// TestNiceAndLimitMarksInOneCycle: a job commented, ordered and lowered in
// one cycle ends with the note and both marks, in two calls (the comment
// goes in the Nice's call); Stop gives back its Nice and limit and takes
// both marks off, leaving the site's text and the note.
func TestNiceAndLimitMarksInOneCycle(t *testing.T) {
	j := pending("1", 1, 2*time.Hour, 1)
	j.AdminComment = "site note"
	c := &countingFake{fakeClient: fakeClient{jobs: []slurm.Job{j}, nodes: []slurm.Node{node("n1", 4, "ALLOCATED")}}}
	r := &slurm.Runner{Client: c, Estimator: &fixedEstimator{}, Dir: t.TempDir(), Now: func() time.Time { return t0 },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Config: slurm.Config{Autopilot: true, Comment: true, Partitions: []string{"gpu"}, Order: []string{"gpu"}, Floor: time.Minute}}
	defer r.Close()
	if err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := c.jobs[0]
	if n, ok := slurm.MarkedNice(got.AdminComment); !ok || n != 0 || got.Nice >= 0 {
		t.Errorf("ordered: Nice %d, comment %q; want a head start and the user's 0 marked", got.Nice, got.AdminComment)
	}
	if l, ok := slurm.MarkedLimit(got.AdminComment); !ok || l != 2*time.Hour || got.TimeLimit != 5*time.Minute {
		t.Errorf("lowered: limit %s, comment %q; want 5m and the user's 2h marked", got.TimeLimit, got.AdminComment)
	}
	if !strings.HasPrefix(got.AdminComment, "site note [prescient: ") || c.updates != 2 {
		t.Errorf("comment %q in %d calls; want the site's text, the note and the marks in 2", got.AdminComment, c.updates)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = c.jobs[0]
	_, niceMarked := slurm.MarkedNice(got.AdminComment)
	_, limitMarked := slurm.MarkedLimit(got.AdminComment)
	if got.Nice != 0 || got.TimeLimit != 2*time.Hour || niceMarked || limitMarked || !strings.HasPrefix(got.AdminComment, "site note [prescient: ") {
		t.Errorf("after Stop: Nice %d, limit %s, comment %q", got.Nice, got.TimeLimit, got.AdminComment)
	}
}

// countingFake counts the fake's updates.
type countingFake struct {
	fakeClient
	updates int
}

func (c *countingFake) Update(ctx context.Context, ids []string, u slurm.Update) error {
	c.updates++
	return c.fakeClient.Update(ctx, ids, u)
}

// stopWithLostState stops a Prescient started on an empty state folder
// over a fake cluster of jobs, and returns the jobs as it leaves them.
func stopWithLostState(t *testing.T, jobs []slurm.Job) []slurm.Job {
	t.Helper()
	c := &fakeClient{jobs: jobs}
	r := &slurm.Runner{Client: c, Estimator: minuteEstimator{}, Dir: t.TempDir(), Now: func() time.Time { return t0 },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer r.Close()
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c.jobs
}
