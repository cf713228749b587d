package cluster

import (
	"fmt"
	"strings"
)

// Tier is a job's priority tier. Tiers are ordered: a higher tier is more
// important, is scheduled first and may preempt lower tiers.
type Tier int

// The priority tiers, from least to most important. The zero value is
// TierOpportunistic, so a Tier must always be set explicitly or parsed;
// DefaultTier is what a job gets when its source says nothing.
const (
	TierOpportunistic Tier = iota
	TierBatch
	TierStandard
	TierProduction
)

// DefaultTier is the tier of a job whose source names none.
const DefaultTier = TierStandard

var tierNames = [...]string{
	TierOpportunistic: "opportunistic",
	TierBatch:         "batch",
	TierStandard:      "standard",
	TierProduction:    "production",
}

// Tiers lists every tier from most to least important.
func Tiers() []Tier {
	return []Tier{TierProduction, TierStandard, TierBatch, TierOpportunistic}
}

// String returns the tier's name, e.g. "production".
func (t Tier) String() string {
	if t.Valid() {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// Valid reports whether t is one of the named tiers.
func (t Tier) Valid() bool { return t >= TierOpportunistic && t <= TierProduction }

// ParseTier parses a tier name, case-insensitively.
func ParseTier(s string) (Tier, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for t, n := range tierNames {
		if n == name {
			return Tier(t), nil
		}
	}
	return 0, fmt.Errorf("unknown priority tier %q (want one of production, standard, batch, opportunistic)", s)
}

// MarshalText encodes the tier as its name.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid priority tier %d", int(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText decodes a tier name.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
