package main

import (
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

type versionReport struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Module    string `json:"module"`
	Platform  string `json:"platform"`
}

func (r versionReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("version", r.Version)
	t.row("go", r.GoVersion)
	t.row("module", r.Module)
	t.row("platform", r.Platform)
	return t.flush()
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := versionReport{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				r.Module = bi.Main.Path
			}
			return g.print(cmd.OutOrStdout(), r)
		},
	}
}
