package lend

import (
	"errors"
	"fmt"
	"time"
)

// MaxRecent is the longest Settings.Recent: the inference utilization the
// live plane keeps (a little over the idle model's four hours of
// features), and so the most a replay may read back for it too.
const MaxRecent = 4*time.Hour + 9*time.Minute

// DefaultLevel is the quantile of the idle model's forecast lent on unless
// told: the pool's idle GPUs are at least that many nine times in ten.
const DefaultLevel = 0.1

// DefaultRecent is the stretch a lender reads back unless told.
const DefaultRecent = 30 * time.Minute

// Settings are how a lending decides, as `serve` (lending.Config) and
// `simulate` both take them; Validate is the one check of them.
type Settings struct {
	Policy
	// Level is the quantile of the idle model's forecast lent on
	// (Model.Level).
	Level float64
	// Recent caps the model by what was idle throughout the last Recent
	// (Model.Recent) and, without a model, is the reactive rule itself
	// (Recent); zero is the model alone, and without a model nothing is
	// lent.
	Recent time.Duration
}

// Validate checks every setting; each error names its field after prefix
// (a flag's, "--lend-", or a config's, "lending: "), as "every 90s: want
// whole minutes".
func (s Settings) Validate(prefix string) error {
	errs := []error{s.Policy.Validate(prefix)}
	if !(s.Level > 0 && s.Level < 1) {
		errs = append(errs, fmt.Errorf("%slevel %g: want a quantile in (0, 1)", prefix, s.Level))
	}
	if s.Recent < 0 || s.Recent > MaxRecent {
		errs = append(errs, fmt.Errorf("%srecent %s: want 0 (the model alone) to %s (the utilization kept)", prefix, s.Recent, MaxRecent))
	}
	return errors.Join(errs...)
}

// Validate checks the policy's durations and headroom; errors name the
// field after prefix, as Settings.Validate's do.
func (p Policy) Validate(prefix string) error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"every", p.Every}, {"min-loan", p.MinLoan}, {"notice", p.Notice}} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("%s%s %s: want a positive duration", prefix, f.name, f.d))
		}
	}
	if p.Every%time.Minute != 0 {
		errs = append(errs, fmt.Errorf("%severy %s: want whole minutes", prefix, p.Every))
	}
	if p.Headroom < 0 {
		errs = append(errs, fmt.Errorf("%sheadroom %d: want 0 or more GPUs", prefix, p.Headroom))
	}
	return errors.Join(errs...)
}
