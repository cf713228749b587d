package cluster

import (
	"errors"
	"fmt"
	"io"
)

// The tenants file says who shares the fleet and on what terms; a fleet
// file's tenants: takes the same entries. Its shape:
//
//	tenants:
//	  - name: vision
//	    weight: 2                   # fair share relative to the others (default 1)
//	    cohort: research            # members lend each other unused quota
//	    quota:                      # nominal GPUs by flavour (GPU model)
//	      - gpus: 32                # no model: every model not listed
//	        borrowing_limit: 16     # the most beyond 32 it borrows (default: no cap)
//	        lending_limit: 8        # the most of its 32 others borrow (default: all)
//	      - model: A100-SXM4-80GB
//	        gpus: 8
//	    tiers: [standard, batch]    # the tiers its jobs may ask for (default: all)
//	    max_running_jobs: 40        # default: no cap
//	    reclaim: lower_tier         # which borrowers' jobs it preempts to get
//	                                # its quota back: any (default), lower_tier, never
//	  - {name: ops, quota_gpus: 8}  # shorthand for quota: [{gpus: 8}]
//
// A tenant with quotas uses only the flavours listed; one without uses any.
type tenantsFile struct {
	Tenants []tenantFile `yaml:"tenants"`
}

type tenantFile struct {
	Name           string      `yaml:"name"`
	Weight         *float64    `yaml:"weight"`
	Cohort         string      `yaml:"cohort"`
	QuotaGPUs      *int        `yaml:"quota_gpus"`
	Quota          []quotaFile `yaml:"quota"`
	Tiers          []string    `yaml:"tiers"`
	MaxRunningJobs int         `yaml:"max_running_jobs"`
	Reclaim        string      `yaml:"reclaim"`
}

type quotaFile struct {
	Model          string `yaml:"model"`
	GPUs           *int   `yaml:"gpus"`
	BorrowingLimit *int   `yaml:"borrowing_limit"`
	LendingLimit   *int   `yaml:"lending_limit"`
}

// ReadTenantsFile parses a tenants file; name is used in errors, which give
// the line of the tenant concerned. Unknown keys are errors.
func ReadTenantsFile(r io.Reader, name string) ([]Tenant, error) {
	var tf tenantsFile
	root, err := decodeStrict(r, name, "tenants file", &tf)
	if err != nil {
		return nil, err
	}
	if len(tf.Tenants) == 0 {
		return nil, &FleetFileError{File: name, Msg: "tenants: none listed"}
	}
	ts, err := readTenants(tf.Tenants, sequenceLines(root, "tenants"), name)
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// readTenants turns the entries of a tenants: list into tenants and checks
// them as a whole (names unique); errors give each entry's line.
func readTenants(entries []tenantFile, lines []int, file string) ([]Tenant, error) {
	var errs []error
	out := make([]Tenant, 0, len(entries))
	seen := map[string]int{}
	for i, t := range entries {
		ten, err := t.tenant()
		if err == nil {
			if first, dup := seen[ten.Name]; dup {
				err = fmt.Errorf("name: %q is tenants[%d] already", ten.Name, first)
			}
		}
		if err != nil {
			errs = append(errs, &FleetFileError{File: file, Line: lineAt(lines, i), Msg: fmt.Sprintf("tenants[%d]: %v", i, err)})
			continue
		}
		seen[ten.Name] = i
		out = append(out, ten)
	}
	return out, errors.Join(errs...)
}

func (t tenantFile) tenant() (Tenant, error) {
	ten := Tenant{Name: t.Name, Weight: 1, Cohort: t.Cohort, MaxRunningJobs: t.MaxRunningJobs, Reclaim: Reclaim(t.Reclaim)}
	if t.Name == "" {
		return ten, errors.New("name: missing")
	}
	if t.Weight != nil {
		ten.Weight = *t.Weight
	}
	if !(ten.Weight > 0) {
		return ten, fmt.Errorf("weight: %g must be positive", ten.Weight)
	}
	if t.QuotaGPUs != nil && len(t.Quota) > 0 {
		return ten, errors.New("quota_gpus and quota: give one (quota_gpus: N is quota: [{gpus: N}])")
	}
	if t.QuotaGPUs != nil {
		if *t.QuotaGPUs < 0 {
			return ten, fmt.Errorf("quota_gpus: %d is negative", *t.QuotaGPUs)
		}
		ten.Quota = []Quota{{GPUs: *t.QuotaGPUs}}
	}
	for i, q := range t.Quota {
		if q.GPUs == nil {
			return ten, fmt.Errorf("quota[%d].gpus: missing", i)
		}
		ten.Quota = append(ten.Quota, Quota{Model: q.Model, GPUs: *q.GPUs, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit})
	}
	for i, s := range t.Tiers {
		tier, err := ParseTier(s)
		if err != nil {
			return ten, fmt.Errorf("tiers[%d]: %w", i, err)
		}
		ten.Tiers = append(ten.Tiers, tier)
	}
	return ten, ten.validateQuota()
}
