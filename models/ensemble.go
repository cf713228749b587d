package models

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// EnsembleName names the ensemble of the learned models and the rolling
// median.
const EnsembleName = "ensemble"

// ensembleMembers are the ensemble's members, in this order.
var ensembleMembers = []string{ForestName, GBTName, MLPName}

// olderMembers are the members of ensembles trained before gbt joined:
// such an ensemble still serves.
var olderMembers = []string{ForestName, MLPName, RollingMedianName}

func init() {
	register(Learner{Name: EnsembleName,
		Doc: "the golearn forest, the gradient-boosted trees and the gorgonia MLP, the median of their log-space quantiles",
		New: func(o Options) Model { return &Ensemble{opt: o} }})
}

// Ensemble takes, quantile by quantile and in log space, the median of its
// three members' forecasts (the median of non-decreasing sequences is
// non-decreasing, so the quantiles stay ordered). Nothing is tuned on any
// window, so the ensemble cannot overfit the window that scores it. Where
// two members agree the third is outvoted, so one member's miss does not
// move it: on the first week of Philly, gbt's P50 was off by more than
// e² for 40% of the later jobs while the forest's mae_log was 0.48. Each
// member's seed matters less in the median than alone.
//
// The rolling median was the third member while the learners saw
// absolute levels. Since they see levels relative to the comparable jobs
// (FeatureConfig.Relative) and a Blend pulls every learned model toward
// the rolling median where its corrections err, that vote is the Blend's
// to make.
type Ensemble struct {
	members []Model
	opt     Options
}

var _ Model = (*Ensemble)(nil)

// Name implements Model.
func (*Ensemble) Name() string { return EnsembleName }

// EnsembleOf is the ensemble of members already fitted on the same rows:
// what Fit would give with their options, without fitting them again.
// They must be the ensemble's members, by name (EnsembleMembers).
func EnsembleOf(o Options, members []Model) (Model, error) {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name()
	}
	if !slices.Equal(names, ensembleMembers) {
		return nil, fmt.Errorf("%s: members %v, want %v", EnsembleName, names, ensembleMembers)
	}
	return &Ensemble{members: slices.Clone(members), opt: o}, nil
}

// EnsembleMembers names the ensemble's members, in order.
func EnsembleMembers() []string { return slices.Clone(ensembleMembers) }

// Fit fits every member on the same rows, one after the other.
func (e *Ensemble) Fit(ctx context.Context, X [][]float64, y []float64) error {
	if _, err := checkFit(X, y); err != nil {
		return err
	}
	e.members = e.members[:0]
	for k, name := range ensembleMembers {
		l, err := LookupLearner(name)
		if err != nil {
			return fmt.Errorf("%s: %w", EnsembleName, err)
		}
		opt := e.opt
		opt.Progress = func(done, total int) {
			// Each member counts as an equal share of the whole fit.
			e.opt.progress(k*total+done, len(ensembleMembers)*total)
		}
		m := l.New(opt)
		if err := m.Fit(ctx, X, y); err != nil {
			return fmt.Errorf("%s: %s: %w", EnsembleName, name, err)
		}
		e.members = append(e.members, m)
	}
	return nil
}

// PredictQuantiles is the median of the members' quantiles. The members
// predict concurrently: each reads X and writes only its own result.
func (e *Ensemble) PredictQuantiles(X [][]float64, qs []float64) ([][]float64, error) {
	if len(e.members) == 0 {
		return nil, ErrNotFitted
	}
	preds := make([][][]float64, len(e.members))
	errs := make([]error, len(e.members))
	var wg sync.WaitGroup
	for k, m := range e.members {
		wg.Go(func() { preds[k], errs[k] = m.PredictQuantiles(X, qs) })
	}
	wg.Wait()
	out := matrix(len(X), len(qs))
	for k := range preds {
		if errs[k] != nil {
			return nil, fmt.Errorf("%s: %s: %w", EnsembleName, e.members[k].Name(), errs[k])
		}
	}
	vals := make([]float64, len(preds))
	for i := range out {
		for k := range out[i] {
			for m := range preds {
				vals[m] = preds[m][i][k]
			}
			slices.Sort(vals)
			n := len(vals)
			if n%2 == 1 {
				out[i][k] = vals[n/2]
			} else {
				out[i][k] = (vals[n/2-1] + vals[n/2]) / 2
			}
		}
	}
	return out, nil
}

// ensembleWire is an encoded ensemble: each member by name.
type ensembleWire struct {
	Names   []string
	Members [][]byte
}

// MarshalBinary implements Model.
func (e *Ensemble) MarshalBinary() ([]byte, error) {
	var w ensembleWire
	for _, m := range e.members {
		b, err := m.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", EnsembleName, m.Name(), err)
		}
		w.Names = append(w.Names, m.Name())
		w.Members = append(w.Members, b)
	}
	return gobEncode(&w)
}

// UnmarshalBinary implements Model: the members must be exactly the ones
// this version of the ensemble is made of (or the olderMembers),
// each one valid.
func (e *Ensemble) UnmarshalBinary(data []byte) error {
	var w ensembleWire
	if err := gobDecode(data, &w); err != nil {
		return err
	}
	if !slices.Equal(w.Names, ensembleMembers) && !slices.Equal(w.Names, olderMembers) || len(w.Members) != len(w.Names) {
		return fmt.Errorf("%s: members %v, want %v", EnsembleName, w.Names, ensembleMembers)
	}
	members := make([]Model, len(w.Names))
	for k, name := range w.Names {
		l, err := LookupLearner(name)
		if err != nil {
			return fmt.Errorf("%s: %w", EnsembleName, err)
		}
		m := l.New(e.opt)
		if err := m.UnmarshalBinary(w.Members[k]); err != nil {
			return fmt.Errorf("%s: member %s: %w", EnsembleName, name, err)
		}
		members[k] = m
	}
	e.members = members
	return nil
}
