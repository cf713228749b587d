package slurm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// Snapshot is the cluster as read at Now. Priority is read only when
// the Config orders jobs; Carbon, the grid's carbon intensity, only when
// it holds jobs (nil: unknown, and nothing is held).
type Snapshot struct {
	Now      time.Time
	Jobs     []Job
	Nodes    []Node
	Priority Priority
	Carbon   executor.Carbon
}

// byID indexes the snapshot's jobs by ID.
func (s *Snapshot) byID() map[string]*Job {
	jobs := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	return jobs
}

// Config is what a site lets Prescient do.
type Config struct {
	// Comment appends the advice to each pending job's AdminComment.
	Comment bool
	// Autopilot pulls the levers below; off, Prescient only advises, and
	// what it changed before is restored.
	Autopilot bool
	// Partitions are those whose pending jobs' limits it may lower; none:
	// no limit is lowered.
	Partitions []string
	// Floor is the least limit it sets.
	Floor time.Duration
	// ParkIdleAfter powers down a node idle that long while no job pends
	// in its partitions (zero: never); ParkPartitions are the partitions
	// whose nodes it may park (none: every node may be parked).
	ParkIdleAfter  time.Duration
	ParkPartitions []string
	// Order are the partitions whose pending jobs it orders through Nice
	// (Priority.HeadStartNice of each job's estimate); none: no Nice is
	// set.
	Order []string
	// HoldQOS are the QOS of the site's deferrable work: their pending
	// jobs are the opportunistic tier, which Holder may hold (scontrol
	// hold) and release; none, or no Holder: nothing is held. Holder must
	// hold that tier (cmd's carbonHold: the rule of simulate --carbon-wait).
	HoldQOS []string
	Holder  executor.Holder
}

// ErrUnknownPartition is returned when the Config names a partition the
// cluster's nodes are not in: a misspelt partition would otherwise make
// autopilot do nothing, silently.
var ErrUnknownPartition = errors.New("no node is in that partition")

// checkPartitions checks that Partitions, ParkPartitions and Order name
// partitions of nodes.
func (c Config) checkPartitions(nodes []Node) error {
	known := map[string]bool{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			known[p] = true
		}
	}
	for _, list := range []struct {
		what  string
		names []string
	}{{"partition", c.Partitions}, {"park partition", c.ParkPartitions}, {"order partition", c.Order}} {
		for _, p := range list.names {
			if !known[p] {
				return fmt.Errorf("slurm: %s %q: %w (the cluster's: %s)", list.what, p, ErrUnknownPartition,
					strings.Join(slices.Sorted(maps.Keys(known)), ", "))
			}
		}
	}
	return nil
}

// mayLower says whether autopilot may lower j's limit: every partition it
// may run in is one of Partitions.
func (c Config) mayLower(j *Job) bool { return c.Autopilot && within(j, c.Partitions) }

// mayOrder says whether autopilot may set j's Nice: every partition it
// may run in is one of Order.
func (c Config) mayOrder(j *Job) bool { return c.Autopilot && within(j, c.Order) }

// mayHold says whether autopilot may hold j.
func (c Config) mayHold(j *Job) bool {
	return c.Autopilot && c.Holder != nil && slices.Contains(c.HoldQOS, j.QOS)
}

// hold asks the Holder whether to hold pending job j now: as the
// opportunistic tier, queued since it was submitted.
func (c Config) hold(j *Job, snap *Snapshot) (until time.Time, why string, ok bool) {
	spec := j.Spec()
	spec.Tier = cluster.TierOpportunistic
	job := cluster.NewJob(cluster.JobID(j.ID), spec, j.Submit)
	return c.Holder.Hold(&executor.JobView{Job: &job, QueuedSince: j.Submit}, &executor.PlanInput{Now: snap.Now, Carbon: snap.Carbon})
}

// within says whether every partition j may run in is in list.
func within(j *Job, list []string) bool {
	return !slices.ContainsFunc(j.Partitions(), func(p string) bool { return !slices.Contains(list, p) })
}

// Validate names what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Floor < 0 {
		errs = append(errs, fmt.Errorf("slurm: floor %s is negative", c.Floor))
	}
	if c.ParkIdleAfter < 0 {
		errs = append(errs, fmt.Errorf("slurm: park-idle-after %s is negative", c.ParkIdleAfter))
	}
	if c.Autopilot && len(c.Partitions) > 0 && c.Floor < time.Minute {
		errs = append(errs, errors.New("slurm: lowering limits needs a floor of at least a minute"))
	}
	return errors.Join(errs...)
}

// State is what Prescient has changed and must be able to undo: it
// outlives a restart (Runner keeps it in a file).
type State struct {
	// Lowered are the jobs whose limit it lowered, with the user's limit.
	Lowered map[string]Lowered `json:"lowered"`
	// Niced are the jobs whose Nice it set, with the user's.
	Niced map[string]Niced `json:"niced"`
	// Held are the jobs it held, and until when it meant to.
	Held map[string]time.Time `json:"held"`
	// Released are the jobs it held that someone else released, and
	// when it saw that: it does not hold them again.
	Released map[string]time.Time `json:"released"`
	// Parked are the nodes it powered down, and when.
	Parked map[string]time.Time `json:"parked"`
	// IdleSince is when each node was first seen idle.
	IdleSince map[string]time.Time `json:"idle_since"`
	// LastCycle is when the last cycle ended: how RestoreIfStale tells a
	// Prescient that stopped.
	LastCycle time.Time `json:"last_cycle"`
}

// Lowered is a lowered job's limits: the user's and the one set.
type Lowered struct {
	UserLimit time.Duration `json:"user_limit_ns"`
	Set       time.Duration `json:"set_ns"`
	At        time.Time     `json:"at"`
}

// Niced is an ordered job's Nice values: the user's and the one set.
type Niced struct {
	UserNice int       `json:"user_nice"`
	Set      int       `json:"set"`
	At       time.Time `json:"at"`
}

// Action is one change to make through the Client.
type Action struct {
	Kind  ActionKind    `json:"kind"`
	Job   string        `json:"job,omitempty"`
	Node  string        `json:"node,omitempty"`
	Limit time.Duration `json:"limit_ns,omitempty"`
	// UserLimit is the job's limit before a lower: the user's, which a
	// restore puts back.
	UserLimit time.Duration `json:"user_limit_ns,omitempty"`
	// Nice is the Nice to set (nice, restore_nice); UserNice the user's,
	// which a restore puts back.
	Nice     *int `json:"nice,omitempty"`
	UserNice *int `json:"user_nice,omitempty"`
	// Until is when a hold is meant to end.
	Until time.Time `json:"until,omitzero"`
	// Text is the AdminComment to set: a comment's; a lower's when it
	// marks the user's limit for the guard (Mark), a nice's when it marks
	// the user's Nice (NiceMark), and a restore's or restore_nice's when
	// Unmark, in the same call.
	Text string `json:"text,omitempty"`
	// Unmark says a restore or restore_nice also takes its mark off the
	// comment (Text).
	Unmark bool   `json:"unmark,omitempty"`
	Reason string `json:"reason"`
}

// ActionKind is what an Action does.
type ActionKind string

const (
	ActComment   ActionKind = "comment"      // set AdminComment (Text)
	ActLower     ActionKind = "lower"        // lower a pending job's limit to Limit (and set Text, if any)
	ActRestore   ActionKind = "restore"      // give a job its user's limit (Limit) back
	ActNice      ActionKind = "nice"         // set a pending job's Nice
	ActUnNice    ActionKind = "restore_nice" // give a job its user's Nice back
	ActHold      ActionKind = "hold"         // hold a pending job (until Until)
	ActRelease   ActionKind = "release"      // release a job it held
	ActPowerDown ActionKind = "power_down"   // park a node
	ActPowerUp   ActionKind = "power_up"     // wake a parked node
)

// Decide is one cycle's changes, from the snapshot, the advice and what
// was changed before, in seven steps:
//
//  1. comment: each pending job's AdminComment gets the advice, where it
//     changed, and loses the mark of a hold that is over;
//  2. order: in autopilot, a pending job, not held, in the partitions of
//     Order gets the user's Nice plus the head start of its estimate
//     (the recommended limit, at most the user's: HeadStartNice), and
//     again once the estimate has moved by more than a tenth; the first
//     Nice marks the user's in its AdminComment (NiceMark, for a
//     Prescient that lost its state);
//  3. hold: in autopilot, a pending job of HoldQOS, not held, is held
//     when the Holder says so (cleaner power within its wait), its
//     AdminComment marked with the hold's end (HoldMark, for Guard), the
//     mark moved when the end moves later; a job it held is released
//     once the Holder no longer would hold it, or autopilot goes off for
//     it, the mark taken off;
//  4. lower: in autopilot, a pending job in a partition it may touch gets
//     the recommended limit (at least the floor) when that is below the
//     user's, and follows the recommendation as it moves; the first lower
//     marks the user's limit in its AdminComment (Mark, for Guard);
//  5. restore: a lowered job, pending or running, where it may no longer
//     be lowered, or running within RestoreMargin of the lowered limit, gets
//     the user's limit back: lowered limits plan Slurm's backfill, they do
//     not kill jobs while Prescient runs (a restore takes the mark off);
//     an ordered job where it may no longer be ordered gets the user's
//     Nice back (which takes its mark off);
//  6. park: in autopilot, a node idle for ParkIdleAfter while nothing pends
//     in its partitions is powered down;
//  7. wake: a node it parked is powered up when a job pends in its
//     partitions for want of resources, or autopilot is off.
func Decide(cfg Config, snap Snapshot, advice []Advice, st *State) []Action {
	var acts []Action
	jobs := snap.byID()
	ages := snap.Priority.Ages() == nil
	// 1, 2 and 4.
	texts := comments{}
	for _, a := range advice {
		j := jobs[a.Job]
		if j == nil || !j.Pending() {
			continue
		}
		a.UserLimit = st.UserLimit(j) // the note speaks of the user's limit
		comment := j.AdminComment     // as it is to be
		why := a.Reason
		if !j.Held() && holdTag.MatchString(comment) { // a hold's mark outlived it
			comment, why = WithoutHoldMark(comment), "not held: the hold's mark taken off"
		}
		if cfg.Comment && NoteChanged(j.AdminComment, a, snap.Now) {
			comment, why = WithComment(comment, Comment(a)), a.Reason
		}
		commented := comment != j.AdminComment
		if commented {
			acts = append(acts, Action{Kind: ActComment, Job: j.ID, Text: comment, Reason: why})
			texts[j.ID] = comment
		}
		// 2 before 4's marks: each change's comment starts from the last.
		if est := estimate(a); ages && cfg.mayOrder(j) && !j.Held() && est > 0 {
			user := st.UserNice(j)
			if nice := clampNice(user + snap.Priority.HeadStartNice(est)); nice != j.Nice && !st.closeEnough(j, nice, snap.Priority.Points(est/10)) {
				n := texts.nice(j, nice, user, fmt.Sprintf("ordered by submit time plus its estimate, %s", est))
				if commented && n.setsComment() { // the nice sets the comment anyway: one call
					acts = acts[:len(acts)-1]
					n.Reason += "; comment: " + why
				}
				acts = append(acts, n)
			}
		}
		lower := lowerOrRestore(cfg, j, a, st)
		switch {
		case lower == nil:
		case lower.Kind == ActLower:
			if marked, ok := MarkedLimit(j.AdminComment); !ok || marked != a.UserLimit { // the guard's record, in the same call
				lower.Text = WithMark(texts.of(j), a.UserLimit)
				texts[j.ID] = lower.Text
			}
			acts = append(acts, *lower)
		case lower.Kind == ActRestore:
			acts = append(acts, texts.restore(j, lower.Limit, lower.Reason))
		}
	}
	// 3.
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if _, released := st.Released[j.ID]; !j.Pending() || j.Held() || released || !cfg.mayHold(j) {
			continue
		}
		if until, why, ok := cfg.hold(j, &snap); ok {
			acts = append(acts, texts.hold(j, until, why))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Held)) {
		j := jobs[id]
		if j == nil || !j.Pending() || !j.Held() {
			continue // gone, started or released by someone else: State.Observe forgets it
		}
		if !cfg.mayHold(j) {
			acts = append(acts, texts.release(j, "autopilot off for it"))
		} else if until, why, ok := cfg.hold(j, &snap); !ok {
			acts = append(acts, texts.release(j, "its wait for cleaner power is over"))
		} else if marked, ok := MarkedHold(texts.of(j)); !ok || until.Sub(marked) > time.Minute {
			acts = append(acts, texts.hold(j, until, why)) // the guard's record moves with the hold's end
		}
	}
	// 5.
	for _, id := range slices.Sorted(maps.Keys(st.Lowered)) {
		l, j := st.Lowered[id], jobs[id]
		if j == nil || !j.Live() {
			continue // gone: State.Observe forgets it
		}
		switch {
		case !cfg.mayLower(j):
			acts = append(acts, texts.restore(j, l.UserLimit, "autopilot off for its partition"))
		case nearLimit(j, snap.Now):
			acts = append(acts, texts.restore(j, l.UserLimit,
				fmt.Sprintf("ran %s of a lowered %s limit: its own limit back", snap.Now.Sub(j.Start).Round(time.Second), j.TimeLimit)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Niced)) {
		if j := jobs[id]; j != nil && j.Live() && !cfg.mayOrder(j) {
			acts = append(acts, texts.unNice(j, st.UserNice(j), "autopilot off for its partition"))
		}
	}
	// 6 and 7.
	pendingIn := map[string]bool{} // partitions with pending jobs
	starvedIn := map[string]bool{} // partitions with jobs pending for resources
	for i := range snap.Jobs {
		if j := &snap.Jobs[i]; j.Pending() && !j.Held() {
			starved := j.Reason == "Resources" || j.Reason == "Priority" || j.Reason == "None"
			for _, p := range j.Partitions() {
				pendingIn[p] = true
				starvedIn[p] = starvedIn[p] || starved
			}
		}
	}
	for _, n := range snap.Nodes {
		_, ours := st.Parked[n.Name]
		switch {
		case ours && n.Has("POWERED_DOWN") && (!cfg.Autopilot || anyOf(n.Partitions, starvedIn)):
			why := "a job pends in its partitions"
			if !cfg.Autopilot {
				why = "autopilot off"
			}
			acts = append(acts, Action{Kind: ActPowerUp, Node: n.Name, Reason: why})
		case !ours && cfg.Autopilot && cfg.ParkIdleAfter > 0 && n.Idle() && !anyOf(n.Partitions, pendingIn) &&
			(len(cfg.ParkPartitions) == 0 || anyOf(n.Partitions, set(cfg.ParkPartitions))):
			if since, ok := st.IdleSince[n.Name]; ok && snap.Now.Sub(since) >= cfg.ParkIdleAfter {
				acts = append(acts, Action{Kind: ActPowerDown, Node: n.Name,
					Reason: fmt.Sprintf("idle %s and nothing pends in its partitions", snap.Now.Sub(since).Round(time.Second))})
			}
		}
	}
	return acts
}

// estimate is the run time a pending job's order goes by: the
// recommended limit, at most the user's; the user's without one; zero
// without either.
func estimate(a Advice) time.Duration {
	if a.Limit > 0 && a.UserLimit > 0 {
		return min(a.Limit, a.UserLimit)
	}
	return max(a.Limit, a.UserLimit)
}

// UserNice is the Nice j's user gave it: the one it had before it was
// ordered, else its own. A Nice that is neither the one set nor the
// user's was set since by someone else: it is the user's now.
func (st *State) UserNice(j *Job) int {
	if n, ok := st.ours(j); ok {
		return n.UserNice
	}
	return j.Nice
}

// ours is what Niced holds of j while j's Nice is still the one set.
func (st *State) ours(j *Job) (Niced, bool) {
	n, ok := st.Niced[j.ID]
	return n, ok && j.Nice == n.Set
}

// closeEnough says whether ordered job j's Nice is within slack points
// of nice: the estimate behind it moved too little (a tenth of it) to be
// worth an scontrol call.
func (st *State) closeEnough(j *Job, nice, slack int) bool {
	_, ok := st.ours(j)
	return ok && abs(nice-j.Nice) <= slack
}

func abs(n int) int { return max(n, -n) }

func release(id, why string) Action { return Action{Kind: ActRelease, Job: id, Reason: why} }

// comments are jobs' AdminComments as the actions so far leave them, for
// the jobs whose comment an action sets. Every action that sets one
// starts from what the earlier ones set, and the Runner makes a job's
// changes in order, so the last leaves all of them in.
type comments map[string]string

// of is j's comment as the actions so far leave it.
func (c comments) of(j *Job) string {
	if t, ok := c[j.ID]; ok {
		return t
	}
	return j.AdminComment
}

// restore is restore from j's comment as it is to be.
func (c comments) restore(j *Job, userLimit time.Duration, why string) Action {
	a := restore(j, c.of(j), userLimit, why)
	if a.setsComment() {
		c[j.ID] = a.Text
	}
	return a
}

// nice sets j's Nice, marking its comment with the user's Nice where the
// mark is missing or names another (MarkedNice): a later Nice that
// follows the estimate keeps the mark, and goes in a batch.
func (c comments) nice(j *Job, nice, user int, why string) Action {
	a := Action{Kind: ActNice, Job: j.ID, Nice: &nice, UserNice: &user, Reason: why}
	if marked, ok := MarkedNice(c.of(j)); !ok || marked != user {
		a.Text = WithNiceMark(c.of(j), user)
		c[j.ID] = a.Text
	}
	return a
}

// unNice gives j its user's Nice back, taking the mark, if any, off its
// comment in the same call.
func (c comments) unNice(j *Job, user int, why string) Action {
	a := Action{Kind: ActUnNice, Job: j.ID, Nice: &user, Reason: why}
	if t := c.of(j); niceTag.MatchString(t) {
		a.Text, a.Unmark = WithoutNiceMark(t), true
		c[j.ID] = a.Text
	}
	return a
}

// hold holds j until until, marking its comment with until for the guard.
func (c comments) hold(j *Job, until time.Time, why string) Action {
	a := Action{Kind: ActHold, Job: j.ID, Until: until, Reason: why, Text: WithHoldMark(c.of(j), until)}
	c[j.ID] = a.Text
	return a
}

// release releases j, taking the hold's mark, if any, off its comment.
func (c comments) release(j *Job, why string) Action {
	a := release(j.ID, why)
	if t := c.of(j); holdTag.MatchString(t) {
		a.Text, a.Unmark = WithoutHoldMark(t), true
		c[j.ID] = a.Text
	}
	return a
}

// UserLimit is the limit j's user asked for: the one it was lowered from,
// else its own.
func (st *State) UserLimit(j *Job) time.Duration {
	if l, ok := st.Lowered[j.ID]; ok {
		return l.UserLimit
	}
	return j.TimeLimit
}

// lowerOrRestore is step 4 for a pending job and its advice (UserLimit
// set): the recommendation, not below the floor, never above the user's
// limit; nil when the limit stays.
func lowerOrRestore(cfg Config, j *Job, a Advice, st *State) *Action {
	if !cfg.mayLower(j) || a.Limit <= 0 || a.UserLimit <= 0 {
		return nil
	}
	target := max(a.Limit, cfg.Floor, time.Minute)
	switch _, lowered := st.Lowered[j.ID]; {
	case target >= a.UserLimit && lowered:
		r := restore(j, "", a.UserLimit, "the recommendation rose to the user's limit") // unmarked by the caller
		return &r
	case target < a.UserLimit && target != j.TimeLimit:
		return &Action{Kind: ActLower, Job: j.ID, Limit: target, UserLimit: a.UserLimit, Reason: a.Reason}
	}
	return nil
}

// RestoreMargin is how long before a lowered limit a running job gets its
// user's limit back: two minutes or a tenth of the limit, the longer. A
// cycle interval (--every) under it keeps lowered limits from killing.
func RestoreMargin(limit time.Duration) time.Duration { return max(2*time.Minute, limit/10) }

// Observe updates what State tracks of the cluster itself: when nodes
// went idle; lowered and ordered jobs that are gone; jobs lowered or
// ordered by a Prescient whose state is lost (their marks: MarkedLimit,
// MarkedNice); held jobs that are
// gone, started or released by someone else (kept as Released while
// pending); parked nodes that are gone or woken.
func (st *State) Observe(snap Snapshot) {
	st.init()
	jobs := snap.byID()
	forgetUnless(st.Lowered, jobs, Job.Live)
	// A live job whose mark records a limit above its own was lowered by a
	// Prescient whose state is lost: it is ours to give back.
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if _, ok := st.Lowered[j.ID]; ok || !j.Live() {
			continue
		}
		if user, ok := MarkedLimit(j.AdminComment); ok && j.TimeLimit > 0 && j.TimeLimit < user {
			st.Lowered[j.ID] = Lowered{UserLimit: user, Set: j.TimeLimit, At: snap.Now}
		}
	}
	forgetUnless(st.Niced, jobs, Job.Live)
	// A live job whose Nice is not the one its mark records was ordered by
	// a Prescient whose state is lost: its Nice is ours to follow and give
	// back.
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if _, ok := st.Niced[j.ID]; ok || !j.Live() {
			continue
		}
		if user, ok := MarkedNice(j.AdminComment); ok && j.Nice != user {
			st.Niced[j.ID] = Niced{UserNice: user, Set: j.Nice, At: snap.Now}
		}
	}
	for i := range snap.Jobs { // held by a Prescient whose state is lost, as its mark says
		j := &snap.Jobs[i]
		if _, ok := st.Held[j.ID]; ok || !heldByUs(j) {
			continue
		}
		if until, ok := MarkedHold(j.AdminComment); ok {
			st.Held[j.ID] = until
		}
	}
	for id := range st.Held {
		if j := jobs[id]; j == nil || !j.Held() {
			delete(st.Held, id)
			if j != nil && j.Pending() {
				st.Released[id] = snap.Now
			}
		}
	}
	forgetUnless(st.Released, jobs, Job.Pending)
	nodes := map[string]bool{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = true
		if n.Idle() {
			if _, ok := st.IdleSince[n.Name]; !ok {
				st.IdleSince[n.Name] = snap.Now
			}
		} else {
			delete(st.IdleSince, n.Name)
		}
		// Woken (by us, by Slurm for a job, by an operator): no longer ours.
		if _, ok := st.Parked[n.Name]; ok && !n.Parked() {
			delete(st.Parked, n.Name)
		}
	}
	for name := range st.Parked {
		if !nodes[name] {
			delete(st.Parked, name)
		}
	}
}

// forgetUnless deletes from m the jobs that are gone or no longer keep.
func forgetUnless[V any](m map[string]V, jobs map[string]*Job, keep func(Job) bool) {
	for id := range m {
		if j := jobs[id]; j == nil || !keep(*j) {
			delete(m, id)
		}
	}
}

func (st *State) init() {
	if st.Lowered == nil {
		st.Lowered = map[string]Lowered{}
	}
	if st.Niced == nil {
		st.Niced = map[string]Niced{}
	}
	if st.Held == nil {
		st.Held = map[string]time.Time{}
	}
	if st.Released == nil {
		st.Released = map[string]time.Time{}
	}
	if st.Parked == nil {
		st.Parked = map[string]time.Time{}
	}
	if st.IdleSince == nil {
		st.IdleSince = map[string]time.Time{}
	}
}

// Restore is every change to undo when Prescient stops: each lowered job
// still pending or running gets its user's limit back, each ordered one
// its user's Nice, each job it held is released, each node it parked is
// powered up.
func Restore(snap Snapshot, st *State) []Action {
	var acts []Action
	jobs := snap.byID()
	texts := comments{}
	for _, id := range slices.Sorted(maps.Keys(st.Lowered)) {
		if j := jobs[id]; j != nil && j.Live() {
			acts = append(acts, texts.restore(j, st.Lowered[id].UserLimit, "Prescient stops"))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Niced)) {
		if j := jobs[id]; j != nil && j.Live() {
			acts = append(acts, texts.unNice(j, st.UserNice(j), "Prescient stops"))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Held)) {
		if j := jobs[id]; j != nil && j.Held() {
			acts = append(acts, texts.release(j, "Prescient stops"))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(st.Parked)) {
		acts = append(acts, Action{Kind: ActPowerUp, Node: n, Reason: "Prescient stops"})
	}
	return acts
}

func anyOf(list []string, in map[string]bool) bool {
	return slices.ContainsFunc(list, func(s string) bool { return in[s] })
}

func set(list []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range list {
		m[s] = true
	}
	return m
}
