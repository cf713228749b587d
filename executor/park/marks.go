package park

// Mark is a node that bears a Cordoner's parked mark (the Kubernetes
// backend's cordon) as the plane sees it. The mark is what replicas with
// stores of their own share.
type Mark struct {
	// Record is the plane's record of the node; nil when it has none.
	Record *Record
	// Ours: the plane woke the node, found it awake or failed to record
	// its park, so the mark is one it left (an uncordon that failed).
	Ours bool
	// Parking is on; Listed: the fleet lists the node; Up: it is ready.
	Parking, Listed, Up bool
	// Busy, once known, says whether the plane's jobs run there; nil
	// until OnMark asks for it.
	Busy *bool
	// Unparkable is why the Cordoner says the node must stay up; "" when
	// it may be parked.
	Unparkable string
}

// MarkAction is what to do with a marked node.
type MarkAction uint8

// The actions on a mark.
const (
	KeepMark     MarkAction = iota // the node is parked here: the mark is right
	AdoptMark                      // take the node as parked, once the mark is read live again
	UncordonMark                   // the node is not parked: take the mark off
	AskBusy                        // ask again with Busy known
)

// OnMark says what the plane does with a marked node, and why when it
// takes off a mark it could have adopted:
//
//	parked here                                      → keep
//	waking here, or ours, or parking off, or unlisted → uncordon
//	no record, down                                  → adopt (its jobs are gone with it)
//	no record, up, no jobs of the plane there,
//	  nothing Unparkable                             → adopt (still shutting down)
//	no record, up, otherwise                         → uncordon, saying why
//
// A node taken as parked while down counts as seen down, so that it is
// awake once it comes back up.
func OnMark(m Mark) (MarkAction, string) {
	switch {
	case m.Record != nil && m.Record.State == Parked:
		return KeepMark, ""
	case m.Record != nil || m.Ours || !m.Parking || !m.Listed:
		return UncordonMark, ""
	case !m.Up:
		return AdoptMark, ""
	case m.Busy == nil:
		return AskBusy, ""
	case *m.Busy:
		return UncordonMark, "jobs of this plane run there"
	case m.Unparkable != "":
		return UncordonMark, m.Unparkable
	}
	return AdoptMark, ""
}
