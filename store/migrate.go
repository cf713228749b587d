package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrationFiles holds the schema migrations, one file each, named
// NNNN_what.sql and numbered from 0001 without gaps. A migration, once
// released, is never edited: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		m, err := readMigration(e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: want version %d (versions count from 1 without gaps)", m.version, m.name, i+1)
		}
	}
	return ms, nil
}

func readMigration(file string) (migration, error) {
	num, name, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), "_")
	v, err := strconv.Atoi(num)
	if !ok || err != nil || v < 1 {
		return migration{}, fmt.Errorf("migration file %s: want a name like 0001_what.sql", file)
	}
	b, err := migrationFiles.ReadFile(path.Join("migrations", file))
	if err != nil {
		return migration{}, err
	}
	return migration{version: v, name: name, sql: string(b)}, nil
}

// migrate applies, in order and each in its own transaction, the
// migrations the database lacks, and returns the schema version.
func (s *Store) migrate(ctx context.Context) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version      INTEGER NOT NULL PRIMARY KEY,
		name         TEXT    NOT NULL,
		applied_time INTEGER NOT NULL
	) STRICT`
	if _, err := s.w.ExecContext(ctx, create); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, s.w)
	if err != nil {
		return 0, err
	}
	if latest := len(ms); current > latest {
		return 0, fmt.Errorf("%w: the database is at schema version %d, this build of prescient knows versions up to %d; run a newer prescient or use another file",
			ErrSchemaTooNew, current, latest)
	}
	for _, m := range ms {
		if err := s.applyMigration(ctx, m); err != nil {
			return 0, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	return len(ms), nil
}

// schemaVersion is the highest migration applied; 0 for a new database.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// applyMigration runs m unless it is applied already. The check is inside
// the transaction, so two processes opening a new file at once apply each
// migration once.
func (s *Store) applyMigration(ctx context.Context, m migration) error {
	applied := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&n)
		if err != nil || n > 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_time) VALUES (?, ?, ?)",
			m.version, m.name, s.clock().UnixNano())
		applied = err == nil
		return err
	})
	if applied && err == nil {
		s.log.Info("schema migration applied", "version", m.version, "name", m.name)
	}
	return err
}
