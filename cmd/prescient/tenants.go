package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// readTenantsFile reads a tenants file (cluster.ReadTenantsFile).
func readTenantsFile(path string) ([]cluster.Tenant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cluster.ReadTenantsFile(f, path)
}

func newTenantsCmd(g *globals) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "tenants",
		Short: "The tenants in force and their GPUs against their quotas (admin; GET /v1/tenants)",
		Long: `tenants shows the tenants a running serve has in force, where they come from
(serve --tenants FILE, a fleet file, or none), and each tenant's GPUs held
against its quotas as of the last plan cycle: nominal quota, what it
borrows from its cohort, and the limits. With a tenants file it says when
the file was read and, when an edit was refused, why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			info, err := c.Tenants(cmd.Context())
			if err != nil {
				return fmt.Errorf("tenants: %w", err)
			}
			return g.print(cmd.OutOrStdout(), tenantsReport{info})
		},
	}
	cf.register(cmd.Flags())
	return cmd
}

type tenantsReport struct{ service.TenantsInfo }

func (r tenantsReport) writeTable(w io.Writer) error {
	switch f := r.File; {
	case f != nil:
		fmt.Fprintf(w, "tenants file %s, read %s (sha256 %.12s)\n", f.Path, f.LoadedAt.Format(time.RFC3339), f.SHA256)
		if f.LastError != "" {
			fmt.Fprintf(w, "the last edit was refused, the tenants read before stay in force: %s\n", f.LastError)
		}
	default:
		fmt.Fprintf(w, "tenants from: %s\n", r.Source)
	}
	t := newTable(w)
	t.row("TENANT", "COHORT", "WEIGHT", "TIERS", "RUNNING", "RECLAIM", "GPU MODEL", "HELD/QUOTA", "BORROWED", "BORROW LIMIT", "LEND LIMIT")
	for _, ti := range r.Tenants {
		running := fmt.Sprint(ti.RunningJobs)
		if ti.MaxRunningJobs > 0 {
			running += fmt.Sprintf("/%d", ti.MaxRunningJobs)
		}
		base := []any{ti.Name, orDash(ti.Cohort), ti.Weight, strings.Join(ti.Tiers, ","), running, orDash(ti.Reclaim)}
		if len(ti.Quotas) == 0 {
			t.row(append(base, "any", "no quota", "-", "-", "-")...)
		}
		for _, q := range ti.Quotas {
			model := q.Model
			if model == "" {
				model = "any"
			}
			t.row(append(base, model, fmt.Sprintf("%d/%d", q.HeldGPUs, q.NominalGPUs), q.BorrowedGPUs,
				limitOr(q.BorrowingLimitGPUs, "no cap"), limitOr(q.LendingLimitGPUs, "all"))...)
		}
	}
	return t.flush()
}

// limitOr is a limit, or what its absence means.
func limitOr(n *int, none string) string {
	if n == nil {
		return none
	}
	return fmt.Sprint(*n)
}
