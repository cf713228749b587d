package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// ParkedNode is a node powered down because it ran nothing, or being
// woken.
type ParkedNode struct {
	// State is "parked" or "waking", since Since.
	State string
	Since time.Time
	// Node is the node as it was when it parked: a node that is off is
	// not in the fleet's own view.
	Node cluster.Node
	// WakeAfter, for a node parked again after a failed wake, is when it
	// may be woken again; zero: at once.
	WakeAfter time.Time
}

// PutParked records a node's parked state.
func (s *Store) PutParked(ctx context.Context, p ParkedNode) error {
	if p.State != "parked" && p.State != "waking" {
		return fmt.Errorf("store: parked node %s: state %q, want parked or waking", p.Node.Name, p.State)
	}
	t, err := unixNanos(p.Since)
	if err != nil {
		return fmt.Errorf("store: parked node %s: since: %w", p.Node.Name, err)
	}
	after, err := nullNanos(p.WakeAfter)
	if err != nil {
		return fmt.Errorf("store: parked node %s: wake after: %w", p.Node.Name, err)
	}
	shape, err := json.Marshal(p.Node)
	if err != nil {
		return fmt.Errorf("store: parked node %s: %w", p.Node.Name, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO parked_nodes (node, state, since, shape, wake_after) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET state = excluded.state, since = excluded.since, shape = excluded.shape,
		wake_after = excluded.wake_after`,
		p.Node.Name, p.State, t, string(shape), after); err != nil {
		return fmt.Errorf("store: parked node %s: %w", p.Node.Name, err)
	}
	return nil
}

// DeleteParked forgets a node's parking (it is awake). Deleting one that
// is not there is no error.
func (s *Store) DeleteParked(ctx context.Context, node string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM parked_nodes WHERE node = ?", node); err != nil {
		return fmt.Errorf("store: forget parked node %s: %w", node, err)
	}
	return nil
}

// ParkedNodes lists the parked and waking nodes by name.
func (s *Store) ParkedNodes(ctx context.Context) ([]ParkedNode, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT node, state, since, shape, wake_after FROM parked_nodes ORDER BY node")
	if err != nil {
		return nil, fmt.Errorf("store: parked nodes: %w", err)
	}
	defer rows.Close()
	var out []ParkedNode
	for rows.Next() {
		var (
			p           ParkedNode
			name, shape string
			t           int64
			after       sql.NullInt64
		)
		if err := rows.Scan(&name, &p.State, &t, &shape, &after); err != nil {
			return nil, fmt.Errorf("store: parked nodes: %w", err)
		}
		if err := json.Unmarshal([]byte(shape), &p.Node); err != nil {
			return nil, fmt.Errorf("store: parked nodes: node %s: shape: %w", name, err)
		}
		p.Node.Name, p.Since, p.WakeAfter = name, fromNanos(t), fromNullNanos(after)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: parked nodes: %w", err)
	}
	return out, nil
}

// NodeBoot is a woken node's boot as the control plane saw it: from its
// wake until it was up again.
type NodeBoot struct {
	Node  string
	Awake time.Time // when it was seen up
	Boot  time.Duration
}

// KeptBoots is how many of the latest boots the store keeps.
const KeptBoots = 64

// AddBoot records a boot and forgets all but the latest KeptBoots.
func (s *Store) AddBoot(ctx context.Context, b NodeBoot) error {
	if b.Boot <= 0 {
		return fmt.Errorf("store: boot of node %s: %s, want a positive duration", b.Node, b.Boot)
	}
	t, err := unixNanos(b.Awake)
	if err != nil {
		return fmt.Errorf("store: boot of node %s: %w", b.Node, err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO node_boots (node, awake, boot_ns) VALUES (?, ?, ?)", b.Node, t, int64(b.Boot)); err != nil {
			return fmt.Errorf("store: boot of node %s: %w", b.Node, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM node_boots WHERE rowid NOT IN
			(SELECT rowid FROM node_boots ORDER BY awake DESC, rowid DESC LIMIT ?)`, KeptBoots); err != nil {
			return fmt.Errorf("store: boots: forget the oldest: %w", err)
		}
		return nil
	})
}

// Boots lists the boots kept, oldest first.
func (s *Store) Boots(ctx context.Context) ([]NodeBoot, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT node, awake, boot_ns FROM node_boots ORDER BY awake, rowid")
	if err != nil {
		return nil, fmt.Errorf("store: boots: %w", err)
	}
	defer rows.Close()
	var out []NodeBoot
	for rows.Next() {
		var (
			b        NodeBoot
			at, boot int64
		)
		if err := rows.Scan(&b.Node, &at, &boot); err != nil {
			return nil, fmt.Errorf("store: boots: %w", err)
		}
		b.Awake, b.Boot = fromNanos(at), time.Duration(boot)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: boots: %w", err)
	}
	return out, nil
}
