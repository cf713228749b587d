// Package prescient holds the plugins of the prescient policy: the queue
// order (tiers, deadline urgency, fair share, predicted shortest first with
// aging) and the reserver (reservations for urgent deadline jobs and for
// jobs that waited too long).
package prescient
