package store

import (
	"context"
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
	shape, err := json.Marshal(p.Node)
	if err != nil {
		return fmt.Errorf("store: parked node %s: %w", p.Node.Name, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO parked_nodes (node, state, since, shape) VALUES (?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET state = excluded.state, since = excluded.since, shape = excluded.shape`,
		p.Node.Name, p.State, t, string(shape)); err != nil {
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
	rows, err := s.r.QueryContext(ctx, "SELECT node, state, since, shape FROM parked_nodes ORDER BY node")
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
		)
		if err := rows.Scan(&name, &p.State, &t, &shape); err != nil {
			return nil, fmt.Errorf("store: parked nodes: %w", err)
		}
		if err := json.Unmarshal([]byte(shape), &p.Node); err != nil {
			return nil, fmt.Errorf("store: parked nodes: node %s: shape: %w", name, err)
		}
		p.Node.Name, p.Since = name, time.Unix(0, t).UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: parked nodes: %w", err)
	}
	return out, nil
}
