package service

import (
	"context"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// What the plane is plugged into: the nodes it plans on, who hears its
// events and recommendations, and how a backend keeps parked nodes
// apart.

// NodeSource says which nodes the fleet has now: a static fleet file, or
// the nodes whose agents registered (the agent backend).
type NodeSource interface {
	Nodes() []cluster.Node
}

// StaticFleet is a NodeSource over a fleet that does not change.
type StaticFleet struct{ Fleet *cluster.Fleet }

// Nodes implements NodeSource.
func (s StaticFleet) Nodes() []cluster.Node { return s.Fleet.Nodes }

// LifecycleEvent is one thing that happened to a job, as webhooks post it,
// or to a node: an inference node's loan (Type node_lent, node_returning
// or node_serving, with Node and Pool, and no job) or its parking
// (node_parked, node_waking or node_awake, with Node).
type LifecycleEvent struct {
	Type     string            `json:"type"` // the store's event type: submitted, started, checkpointed, preempted, requeued, finished, failed, cancelled, ...; or node_lent, node_returning, node_serving, node_parked, node_waking, node_awake
	Time     time.Time         `json:"time"`
	Node     string            `json:"node,omitempty"`
	Pool     string            `json:"pool,omitempty"`
	Job      cluster.JobID     `json:"job"`
	Tenant   string            `json:"tenant"`
	State    cluster.JobState  `json:"state,omitempty"` // a job event's
	Attempt  int               `json:"attempt"`
	Message  string            `json:"message,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	ExitCode *int              `json:"exit_code,omitempty"`
}

// Notifier hears job lifecycle events (webhooks). Notify must return at
// once: delivery and retries are the notifier's business.
type Notifier interface {
	Notify(ctx context.Context, e LifecycleEvent)
}

// RecommendationSink hears the recommendations the advisor records, once
// each, with the ID the store gave them. Recommended must return at once.
type RecommendationSink interface {
	Recommended(ctx context.Context, r Recommendation)
}

// Cordoner keeps a parked node from work the plane does not place, where
// other schedulers share the fleet (the Kubernetes backend cordons it).
// The plane parks no node Unparkable names (other schedulers' pods run
// there, or it is one host of several planner nodes), cordons a node
// before it records it parked, and uncordons it when it is woken. The
// mark is what replicas with stores of their own share: how the plane
// reads it after a restart is control/parking's doc.
type Cordoner interface {
	// Unparkable says why node must not be powered down; "" when it may.
	Unparkable(node string) string
	// Cordon marks node as parked by Prescient and takes no new work of
	// any scheduler there. placed reports whether the mark is on because
	// of this call (false: it was on, or the node is gone); with an error
	// and placed, the call failed after putting it on and could not take
	// it off. Uncordon takes off what Cordon put on, and nothing from a
	// node that bears no mark.
	Cordon(ctx context.Context, node string) (placed bool, err error)
	Uncordon(ctx context.Context, node string) error
	// Cordoned names the nodes that bear Cordon's mark, as last seen.
	Cordoned() []string
	// Marked reads whether node bears the mark now from the source, not
	// a cache; an error when it cannot tell (the node is gone too).
	Marked(ctx context.Context, node string) (bool, error)
}

// NodeLoan is an inference node's loan state, as GET /v1/fleet shows it.
type NodeLoan struct {
	Pool  string    `json:"pool"`
	State string    `json:"state"` // serving, lent, returning
	Since time.Time `json:"since,omitzero"`
	// Usable is when training may be placed on a lent node (Handover
	// after the loan).
	Usable time.Time `json:"usable,omitzero"`
}
