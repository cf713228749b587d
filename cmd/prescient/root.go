package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// globals are the settings every command shares.
type globals struct {
	configPath string
	logLevel   string
	logFormat  string
	output     string

	logger *slog.Logger
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "prescient",
		Short: "Predictive scheduler for GPU clusters",
		Long: `Prescient forecasts job durations, GPU-memory footprints and idle windows from a
cluster's own history and uses them to decide where and when GPU jobs run.

Settings come from flags, PRESCIENT_* environment variables and a YAML config
file, in that order of precedence:

  flag > environment > config file > built-in default

Every flag has an environment variable: PRESCIENT_ and the flag's name in upper
case with dashes as underscores (--log-level: PRESCIENT_LOG_LEVEL). The config
file (--config or PRESCIENT_CONFIG) holds the root's flags at its top level and
each command's flags under the command's name:

  log_level: info
  serve:
    listen: 127.0.0.1:8080
  datasets:
    inspect:
      lenient: true

Unknown keys and values that do not parse are errors, never ignored.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applySettings(cmd); err != nil {
				return err
			}
			return g.setup(cmd.ErrOrStderr())
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "YAML config file (env PRESCIENT_CONFIG)")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	pf.StringVarP(&g.output, "output", "o", "table", "report format: table or json")

	root.AddCommand(
		newVersionCmd(g),
		newServeCmd(g),
		newDatasetsCmd(g),
		newSimulateCmd(g),
		newTrainCmd(g),
		newEvaluateCmd(g),
		newPredictCmd(g),
		newModelsCmd(g),
		newCollectCmd(g),
		newAgentCmd(g),
		newJobsCmd(g),
		newQueueCmd(g),
		newTenantsCmd(g),
		newWhatIfCmd(g),
		newWorkloadCmd(g),
		newSlurmCmd(g),
	)
	return root
}

// setup validates the global settings and builds the logger.
func (g *globals) setup(stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		g.logger = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		g.logger = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		return fmt.Errorf("--log-format: %q is not one of text, json", g.logFormat)
	}
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("--output: %q is not one of table, json", g.output)
	}
	return nil
}
