package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/training"
)

func newModelsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the model registry's versions or roll back to one",
	}
	var dir, target string
	pf := cmd.PersistentFlags()
	pf.StringVar(&dir, "models", "", "model registry directory")
	pf.StringVar(&target, "target", "duration", "duration, memory, peak (the online memory refinement) or idle")
	reg := func() (training.Registry, models.Target, error) {
		t, err := models.ParseTarget(target)
		if target == string(idle.Target) || target == string(models.TargetPeak) {
			t, err = models.Target(target), nil
		}
		if err != nil {
			return training.Registry{}, "", fmt.Errorf("--target: %w", err)
		}
		if dir == "" {
			return training.Registry{}, "", fmt.Errorf("--models: missing (the registry directory)")
		}
		return training.Registry{Dir: dir}, t, nil
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the published versions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, t, err := reg()
			if err != nil {
				return err
			}
			ms, err := r.List(t)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), modelsReport{Target: t, Versions: ms})
		},
	}
	var to int
	rollback := &cobra.Command{
		Use:   "rollback",
		Short: "Serve an older version: --to VERSION, or the one before the current",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, t, err := reg()
			if err != nil {
				return err
			}
			v, err := r.Rollback(t, to)
			if err != nil {
				return err
			}
			g.logger.Info("rolled back", "component", "training", "target", t, "version", v)
			return g.print(cmd.OutOrStdout(), rollbackReport{Target: t, Current: v})
		},
	}
	rollback.Flags().IntVar(&to, "to", 0, "version to serve (default: the one before the current)")
	cmd.AddCommand(list, rollback)
	return cmd
}

type modelsReport struct {
	Target   models.Target       `json:"target"`
	Versions []training.Manifest `json:"versions"`
}

func (r modelsReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("version", "current", "created", "data", "rows", "selected", training.GateMetric(r.Target))
	for _, m := range r.Versions {
		cur := ""
		if m.Current {
			cur = "*"
		}
		t.row(m.Version, cur, m.CreatedAt.Format(time.RFC3339),
			m.DataFrom.Format(time.DateOnly)+".."+m.DataUntil.Format(time.DateOnly), m.Rows, m.Selected,
			fmt.Sprintf("%.4f", m.Metrics[m.Selected][training.GateMetric(r.Target)]))
	}
	return t.flush()
}

type rollbackReport struct {
	Target  models.Target `json:"target"`
	Current int           `json:"current_version"`
}

func (r rollbackReport) writeTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s now serves version %d\n", r.Target, r.Current)
	return err
}
