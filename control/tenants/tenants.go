// Package tenants keeps the live plane's tenants as a tenants file says
// (cluster.ReadTenantsFile): weights, cohorts, quotas, tiers, caps. The
// file is the one source of truth: it is read again when it changes or
// when asked (SIGHUP), and a file that does not read leaves the last good
// tenants in force, its error reported, so a typo never drops every quota.
package tenants

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// File is the tenants of one tenants file.
type File struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	cur    []cluster.Tenant
	sum    [sha256.Size]byte
	status Status
}

// Status is what the admin API shows of the file: where it is, when the
// tenants in force were read and their content's hash, and the error of
// the last read if it failed (the tenants in force are then older).
type Status struct {
	Path      string    `json:"path"`
	LoadedAt  time.Time `json:"loaded_at"`
	SHA256    string    `json:"sha256"`
	LastError string    `json:"last_error,omitempty"`
	ErrorAt   time.Time `json:"error_at,omitzero"`
}

// Open reads the file; an error names the file and the line.
func Open(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File{path: path, log: log, status: Status{Path: path}}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Tenants are the tenants in force; callers must not change them.
func (f *File) Tenants() []cluster.Tenant {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// Status is the file's status.
func (f *File) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// Reload reads the file now. It reports whether the tenants changed; on
// an error the tenants in force stay and the error is kept in Status.
func (f *File) Reload() (bool, error) {
	data, err := os.ReadFile(f.path)
	var ts []cluster.Tenant
	if err == nil {
		ts, err = cluster.ReadTenantsFile(bytes.NewReader(data), f.path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("tenants file: %w", err)
		f.status.LastError, f.status.ErrorAt = err.Error(), time.Now().UTC()
		return false, err
	}
	sum := sha256.Sum256(data)
	changed := sum != f.sum
	f.cur, f.sum = ts, sum
	f.status.LoadedAt, f.status.SHA256 = time.Now().UTC(), fmt.Sprintf("%x", sum)
	f.status.LastError, f.status.ErrorAt = "", time.Time{}
	return changed, nil
}

// Watch reads the file again every period (a change of content is
// applied, an unchanged file costs a read) and whenever hup delivers,
// until ctx ends. Each change calls applied with the new tenants.
func (f *File) Watch(ctx context.Context, every time.Duration, hup <-chan os.Signal, applied func([]cluster.Tenant)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-hup:
			f.log.Info("tenants file: reloading on SIGHUP", "component", "tenants", "path", f.path)
		}
		changed, err := f.Reload()
		if err != nil {
			f.log.Error("tenants file refused; the tenants read before stay in force", "component", "tenants", "error", err)
			continue
		}
		if changed {
			ts := f.Tenants()
			f.log.Info("tenants file applied", "component", "tenants", "path", f.path, "tenants", len(ts))
			if applied != nil {
				applied(ts)
			}
		}
	}
}
