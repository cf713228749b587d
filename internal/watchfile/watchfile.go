// Package watchfile keeps what a configuration file says (tenants, bearer
// tokens): the file is the one source of truth, read again when it changes
// or when asked (SIGHUP), and a file that does not read leaves the last
// good content in force, its error reported, so a typo never drops what
// was accepted.
package watchfile

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// File is the content of one file, as its parser reads it.
type File[T any] struct {
	path  string
	what  string // "tenants file", for errors and logs
	parse func(data []byte, path string) (T, error)
	log   *slog.Logger

	mu     sync.Mutex
	cur    T
	sum    [sha256.Size]byte
	status Status
}

// Status is what an admin may see of the file: where it is, when the
// content in force was read and its hash, and the error of the last read
// if it failed (the content in force is then older).
type Status struct {
	Path      string    `json:"path"`
	LoadedAt  time.Time `json:"loaded_at"`
	SHA256    string    `json:"sha256"`
	LastError string    `json:"last_error,omitempty"`
	ErrorAt   time.Time `json:"error_at,omitzero"`
}

// Open reads the file with parse, whose errors name the file and the
// line; what names the file in errors and logs ("tenants file").
func Open[T any](path, what string, parse func(data []byte, path string) (T, error), log *slog.Logger) (*File[T], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File[T]{path: path, what: what, parse: parse, log: log, status: Status{Path: path}}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Current is the content in force; callers must not change it.
func (f *File[T]) Current() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// Status is the file's status.
func (f *File[T]) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// Reload reads the file now. It reports whether the content changed; on
// an error the content in force stays and the error is kept in Status.
func (f *File[T]) Reload() (bool, error) {
	data, err := os.ReadFile(f.path)
	var v T
	if err == nil {
		v, err = f.parse(data, f.path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%s: %w", f.what, err)
		f.status.LastError, f.status.ErrorAt = err.Error(), time.Now().UTC()
		return false, err
	}
	sum := sha256.Sum256(data)
	changed := sum != f.sum
	f.cur, f.sum = v, sum
	f.status.LoadedAt, f.status.SHA256 = time.Now().UTC(), fmt.Sprintf("%x", sum)
	f.status.LastError, f.status.ErrorAt = "", time.Time{}
	return changed, nil
}

// Watch reads the file again every period (a change of content is
// applied, an unchanged file costs a read) and whenever hup delivers,
// until ctx ends. Each change calls applied with the new content.
func (f *File[T]) Watch(ctx context.Context, every time.Duration, hup <-chan os.Signal, applied func(T)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-hup:
			f.log.Info(f.what+": reloading on SIGHUP", "path", f.path)
		}
		changed, err := f.Reload()
		if err != nil {
			f.log.Error(f.what+" refused; what was read before stays in force", "error", err)
			continue
		}
		if changed {
			f.log.Info(f.what+" applied", "path", f.path)
			if applied != nil {
				applied(f.Current())
			}
		}
	}
}
