package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Connection settings.
const (
	// busyTimeout is how long a connection waits for a lock another process
	// (a second prescient on the same file, the sqlite3 shell) holds before
	// it fails with SQLITE_BUSY. Inside one process writes queue on the
	// single writer connection instead and never meet a lock.
	busyTimeout = 5 * time.Second
	// readConns bounds the pool of read-only connections. In WAL mode
	// readers neither block the writer nor each other.
	readConns = 4
)

// DefaultLimit is how many rows a List method returns when its limit is 0.
const DefaultLimit = 1000

// Store is the control plane's durable state in one SQLite file. It is safe
// for concurrent use by many goroutines.
type Store struct {
	path string
	// w has exactly one connection: every write is a transaction on it, so
	// writers in this process queue in database/sql, never on SQLite locks.
	w *sql.DB
	// r holds query-only connections for reads, which in WAL mode see the
	// last committed state without waiting for the writer.
	r     *sql.DB
	clock func() time.Time
	log   *slog.Logger
	// eventOutbox, when set, writes the webhook deliveries of each job
	// event in the event's transaction (SetEventOutbox).
	eventOutbox atomic.Pointer[EventOutbox]
	// group gathers concurrent submissions into one transaction (Submit).
	group groupCommit
	// specs are the specs ListJobs decoded.
	specs specCache
}

// Option configures a Store.
type Option func(*options)

type options struct {
	clock  func() time.Time
	logger *slog.Logger
}

// WithClock sets the clock that stamps events and recommendations; the
// simulator passes its virtual clock. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}

// WithLogger sets the logger; the Store adds the attribute component=store.
// The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Open opens the database file at path, creating it if needed, and applies
// the schema migrations it lacks. A database written by a newer Prescient
// than this one is refused with an error wrapping ErrSchemaTooNew.
//
// The file runs in WAL mode with synchronous=FULL: in WAL mode NORMAL would
// survive a crash of the process but could lose the last commits when the
// machine loses power, and a job the control plane has acknowledged must
// survive both. The cost is one fsync of the WAL per transaction.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{clock: time.Now, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := open(ctx, path, o)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s, nil
}

func open(ctx context.Context, path string, o options) (*Store, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	s := &Store{path: path, clock: o.clock, log: o.logger.With("component", "store")}
	var err error
	if s.w, err = sql.Open("sqlite", dsn(path, writerParams())); err != nil {
		return nil, err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.init(ctx); err != nil {
		if why := unwritable(path); why != nil {
			err = fmt.Errorf("%w: %w", why, err)
		}
		return nil, errors.Join(err, s.w.Close())
	}
	if s.r, err = sql.Open("sqlite", dsn(path, readerParams())); err != nil {
		return nil, errors.Join(err, s.w.Close())
	}
	s.r.SetMaxOpenConns(readConns)
	s.r.SetMaxIdleConns(readConns)
	if err := s.r.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open a reader: %w", err), s.r.Close(), s.w.Close())
	}
	return s, nil
}

// unwritable says why SQLite cannot write the database, when the file or
// its folder (which holds its -wal and -shm files) cannot be written: a
// read-only filesystem or permissions, which SQLite reports only as
// "unable to open database file". nil when both can be written.
func unwritable(path string) error {
	if _, err := os.Stat(path); err == nil {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("the database file cannot be written: %w", err)
		}
		f.Close()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".prescient-write-probe-*")
	if err != nil {
		return fmt.Errorf("the database's folder %s cannot be written (SQLite keeps its -wal and -shm files there): %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// init switches the file to WAL mode and brings its schema up to date.
func (s *Store) init(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal_mode=WAL: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set journal_mode=WAL: the file stays in %s mode", mode)
	}
	version, err := s.migrate(ctx)
	if err != nil {
		return err
	}
	s.log.Info("store opened", "path", s.path, "schema_version", version)
	return nil
}

// Ping checks that the database answers a read and that the writer
// connection is alive; it is the store's readiness check.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1 FROM schema_migrations LIMIT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: ping %s: read: %w", s.path, err)
	}
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: writer: %w", s.path, err)
	}
	return nil
}

// Close closes the database. Calls in flight fail; later calls fail.
func (s *Store) Close() error {
	if err := errors.Join(s.r.Close(), s.w.Close()); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	s.log.Debug("store closed", "path", s.path)
	return nil
}

// checkPath rejects names that would not give every connection the same
// database: each connection to ":memory:" has a database of its own.
func checkPath(path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return fmt.Errorf("path %q: want the name of a database file", path)
	}
	return nil
}

// writerParams are the settings of the one writer connection. _txlock makes
// every transaction BEGIN IMMEDIATE: it takes the write lock up front, so a
// read-modify-write never has to upgrade a read lock (which, against another
// process, fails at once instead of waiting out busy_timeout).
func writerParams() url.Values {
	return url.Values{
		"_busy_timeout": {strconv.FormatInt(busyTimeout.Milliseconds(), 10)},
		"_synchronous":  {"FULL"},
		"_foreign_keys": {"on"},
		"_txlock":       {"immediate"},
	}
}

// readerParams are the settings of the read connections.
func readerParams() url.Values {
	return url.Values{
		"_busy_timeout": {strconv.FormatInt(busyTimeout.Milliseconds(), 10)},
		"_query_only":   {"on"},
	}
}

// dsn makes an SQLite URI of a file path, escaping the characters a URI
// gives a meaning to.
func dsn(path string, params url.Values) string {
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + escaped + "?" + params.Encode()
}
