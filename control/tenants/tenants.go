// Package tenants keeps the live plane's tenants as a tenants file says
// (cluster.ReadTenantsFile): weights, cohorts, quotas, tiers, caps. The
// file is the one source of truth: it is read again when it changes or
// when asked (SIGHUP), and a file that does not read leaves the last good
// tenants in force, its error reported, so a typo never drops every quota
// (internal/watchfile).
package tenants

import (
	"bytes"
	"log/slog"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/internal/watchfile"
)

// File is the tenants of one tenants file; Watch applies its changes.
type File struct {
	*watchfile.File[[]cluster.Tenant]
}

// Status is what the admin API shows of the file.
type Status = watchfile.Status

// Open reads the file; an error names the file and the line.
func Open(path string, log *slog.Logger) (*File, error) {
	if log != nil {
		log = log.With("component", "tenants")
	}
	f, err := watchfile.Open(path, "tenants file", func(data []byte, path string) ([]cluster.Tenant, error) {
		return cluster.ReadTenantsFile(bytes.NewReader(data), path)
	}, log)
	if err != nil {
		return nil, err
	}
	return &File{f}, nil
}

// Tenants are the tenants in force; callers must not change them.
func (f *File) Tenants() []cluster.Tenant { return f.Current() }
