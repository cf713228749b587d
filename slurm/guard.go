package slurm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"
)

// A lowered limit kills a job that outruns it. While Prescient runs it
// gives the user's limit back before that (Decide, step 5); the watchdog
// (Runner.RestoreIfStale) does after a crash, from the state folder. Were
// the host with the state folder lost too, nothing would. So when
// Prescient lowers a job's limit it also marks the job's AdminComment
// with the user's limit ("[prescient-user-limit: 120m]"), in the same
// scontrol call, and Guard reads the mark from Slurm alone.

// A job Prescient holds stays held if Prescient's host is lost with its
// state. So a hold marks the job's AdminComment with when Prescient means
// it to end ("[prescient-held-until: 2026-12-07T18:00:00Z]"), set before
// the hold and taken off after the release, and moved when the hold's end
// moves; Guard releases a job so marked once that time is GuardHoldGrace
// past.

// An ordered job's Nice is the user's plus a head start. A Prescient that
// lost its state would take the Nice it set for the user's, and order the
// job again on top of it (and Stop would give back nothing). So the first
// Nice set on a job marks its AdminComment with the user's Nice
// ("[prescient-user-nice: 0]"), in the same scontrol call, and giving it
// back takes the mark off; State.Observe reads it. The guard leaves Nice
// values alone: they order pending jobs and kill none.

// GuardHoldGrace is how long past its marked end Guard leaves a hold: a
// running Prescient, which moves the mark when the cleaner power it waits
// for moves, has had its cycles to do so.
const GuardHoldGrace = 15 * time.Minute

// niceTag is the mark of an ordered job's user's Nice in its AdminComment.
var niceTag = regexp.MustCompile(`\s*\[prescient-user-nice: (-?\d+)\]`)

// NiceMark is the mark of a user's Nice.
func NiceMark(user int) string { return "[prescient-user-nice: " + strconv.Itoa(user) + "]" }

// MarkedNice is the user's Nice a job's AdminComment is marked with; false
// without a mark or with one outside Slurm's range of Nice values.
func MarkedNice(comment string) (int, bool) {
	m := niceTag.FindStringSubmatch(comment)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n != clampNice(n) {
		return 0, false
	}
	return n, true
}

// WithNiceMark is existing with its Nice mark, if any, replaced by the
// mark of user.
func WithNiceMark(existing string, user int) string {
	return withTag(existing, niceTag, NiceMark(user))
}

// WithoutNiceMark is existing with its Nice mark, if any, taken out.
func WithoutNiceMark(existing string) string { return withTag(existing, niceTag, "") }

// holdTag is the hold's mark in a job's AdminComment.
var holdTag = regexp.MustCompile(`\s*\[prescient-held-until: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\]`)

// HoldMark is the mark of a hold meant to end at until (to the second).
func HoldMark(until time.Time) string {
	return "[prescient-held-until: " + until.UTC().Truncate(time.Second).Format(time.RFC3339) + "]"
}

// MarkedHold is when a held job's AdminComment says Prescient means its
// hold to end; false without a mark.
func MarkedHold(comment string) (time.Time, bool) {
	m := holdTag.FindStringSubmatch(comment)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, m[1])
	return t, err == nil
}

// WithHoldMark is existing with its hold mark, if any, replaced by the
// mark of until.
func WithHoldMark(existing string, until time.Time) string {
	return withTag(existing, holdTag, HoldMark(until))
}

// WithoutHoldMark is existing with its hold mark, if any, taken out.
func WithoutHoldMark(existing string) string { return withTag(existing, holdTag, "") }

// heldByUs says whether j is held as Prescient holds: by an operator
// (scontrol hold), not by its user (scontrol uhold), whose hold is theirs.
func heldByUs(j *Job) bool { return j.Pending() && j.Reason == "JobHeldAdmin" }

// maxMarkMinutes bounds a mark's limit (a century), so that no mark
// overflows a Duration.
const maxMarkMinutes = 100 * 365 * 24 * 60

// markTag is the mark in a job's AdminComment.
var markTag = regexp.MustCompile(`\s*\[prescient-user-limit: (\d+)m\]`)

// Mark is the mark of a user's limit, rounded up to the minute as Slurm
// keeps limits.
func Mark(userLimit time.Duration) string {
	return "[prescient-user-limit: " + Minutes(userLimit) + "m]"
}

// MarkedLimit is the user's limit a job's AdminComment is marked with;
// false without a mark.
func MarkedLimit(comment string) (time.Duration, bool) {
	m := markTag.FindStringSubmatch(comment)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || n > maxMarkMinutes {
		return 0, false
	}
	return time.Duration(n) * time.Minute, true
}

// WithMark is existing with its mark, if any, replaced by the mark of
// userLimit; the rest is left as it is.
func WithMark(existing string, userLimit time.Duration) string {
	return withTag(existing, markTag, Mark(userLimit))
}

// WithoutMark is existing with its mark, if any, taken out.
func WithoutMark(existing string) string { return withTag(existing, markTag, "") }

// restore gives job j its user's limit back and, where comment (the job's
// AdminComment as it is to be) carries a mark, takes the mark off in the
// same call: a mark stands for a lowered limit, so that neither the guard
// nor a Prescient that lost its state gives back a limit its user lowered
// since.
func restore(j *Job, comment string, userLimit time.Duration, reason string) Action {
	a := Action{Kind: ActRestore, Job: j.ID, Limit: userLimit, Reason: reason}
	if markTag.MatchString(comment) {
		a.Text, a.Unmark = WithoutMark(comment), true
	}
	return a
}

// setsComment says a lower, restore, nice or restore_nice also sets the
// job's AdminComment (Text): one that marks the user's limit or Nice, or
// takes the mark off.
func (a *Action) setsComment() bool { return a.Text != "" || a.Unmark }

// limitUpdate is the scontrol update of a lower or restore: its limit, and
// its comment where it sets one.
func (a *Action) limitUpdate() Update {
	u := Update{TimeLimit: &a.Limit}
	if a.setsComment() {
		u.AdminComment = &a.Text
	}
	return u
}

// niceUpdate is the scontrol update of a nice or restore_nice: its Nice,
// and its comment where it sets one.
func (a *Action) niceUpdate() Update {
	u := Update{Nice: a.Nice}
	if a.setsComment() {
		u.AdminComment = &a.Text
	}
	return u
}

// nearLimit says whether a running job has run to within RestoreMargin of
// its limit: a lowered limit is given back then.
func nearLimit(j *Job, now time.Time) bool {
	return j.Running() && now.Sub(j.Start) >= j.TimeLimit-RestoreMargin(j.TimeLimit)
}

// Guard is what a guard gives back: the user's limit of each running job
// whose limit is below the one its mark records and that has run to
// within RestoreMargin of it, as Decide does while Prescient runs, the
// mark taken off; and the release of each held job whose hold's marked
// end is GuardHoldGrace past, its mark taken off. It needs neither
// Prescient nor its state folder.
func Guard(snap Snapshot) []Action {
	var acts []Action
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if until, ok := MarkedHold(j.AdminComment); ok && heldByUs(j) && snap.Now.Sub(until) > GuardHoldGrace {
			acts = append(acts, comments{}.release(j, fmt.Sprintf("guard: held by Prescient until %s, %s ago",
				until.Format(time.RFC3339), snap.Now.Sub(until).Round(time.Second))))
			continue
		}
		user, ok := MarkedLimit(j.AdminComment)
		if !ok || j.TimeLimit <= 0 || j.TimeLimit >= user || !nearLimit(j, snap.Now) {
			continue
		}
		acts = append(acts, restore(j, j.AdminComment, user,
			fmt.Sprintf("guard: ran %s of a lowered %s limit; its user's %s back", snap.Now.Sub(j.Start).Round(time.Second), j.TimeLimit, user)))
	}
	return acts
}

// RunGuard reads the jobs through c and gives back what Guard says, one
// job at a time, logging each change. It returns the changes made and
// the errors of those that failed. Run it from cron or scrontab every
// minute, on any host with Slurm's commands and a Slurm operator's
// rights; beside a running Prescient it is harmless (a limit given back
// twice is given back once; a hold is released only well after Prescient
// would have released it or moved its mark).
func RunGuard(ctx context.Context, c Client, now time.Time, log *slog.Logger) ([]Action, error) {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("slurm guard: %w", err)
	}
	var done []Action
	var errs []error
	for _, a := range Guard(Snapshot{Now: now, Jobs: jobs}) {
		if err := change(ctx, c, a); err != nil {
			log.Warn("slurm: change failed", append(logAttrs(a), "err", err)...)
			errs = append(errs, fmt.Errorf("slurm guard: job %s: %w", a.Job, err))
			continue
		}
		log.Info("slurm: changed", append(logAttrs(a), "reason", a.Reason)...)
		done = append(done, a)
	}
	return done, errors.Join(errs...)
}
