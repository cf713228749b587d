// Package parking is the live plane's node parking: it powers down the
// nodes that run nothing and wakes them when work needs them, as Slurm's
// power saving does, with the forecasts. When to park and wake is
// executor/park's (Policy.Decide, Needed, and the power states' table in
// its doc); this package gathers the state those read at each cycle,
// carries out what they say and keeps the parked nodes in the store.
//
// In autopilot a park runs the Suspend program, and a wake Resume, with
// the node's name as their argument (Slurm's SuspendProgram and
// ResumeProgram: IPMI, Redfish, a cloud API). A program should start the
// power change and return: it is given a minute, then its process group
// is killed. Either may be empty when a power manager acts on the webhooks
// node_parked, node_waking and node_awake or on GET /v1/fleet instead. In
// advisor mode parks and wakes are recommendations ("park", "wake") and
// nothing changes; nodes parked before still become awake when they come
// up.
//
// The parked nodes are kept in the store with their shape (a node that is
// off has no agent to register it), so a restart forgets none; after a
// restart that found parked nodes the plane only notes the programs that
// end for NodeSyncTimeout, while the agents register again, and neither
// parks, wakes nor takes an unregistered node for one that went down. A
// restart forgets how long the other nodes had been empty.
//
// Where other schedulers share the fleet a service.Cordoner keeps a parked
// node from their work: the node is cordoned before it is recorded parked
// (one that cannot be cordoned is not parked, nor tried again before
// IdleAfter) and uncordoned when it is woken. The mark is what replicas
// with stores of their own share: once a restarted plane's placements and
// the Cordoner's view have synced (NodeSyncTimeout), a node restored
// waking that bears the mark is taken as parked, and one restored parked
// that is up and, read live, bears none as awake; on autopilot a marked
// node with no record here is taken as parked when it is down, or up with
// none of the plane's jobs there and Unparkable silent, and uncordoned
// otherwise; the plane uncordons the marked nodes it woke, found awake or
// failed to record, and all of them with parking off.
package parking
