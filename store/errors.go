package store

import (
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors to test for with errors.Is; the store wraps them with what failed.
var (
	// ErrNotFound: the job (or what else was asked for) is not stored.
	ErrNotFound = errors.New("not found")
	// ErrExists: a job with the same ID is stored already.
	ErrExists = errors.New("already exists")
	// ErrSchemaTooNew: the database was written by a newer Prescient, whose
	// schema this one does not know.
	ErrSchemaTooNew = errors.New("database schema is newer than this program")
	// ErrInvalidTelemetry: a telemetry row can never be stored as it is
	// (no GPU UUID, a time out of range, an unknown field); retrying it is
	// pointless.
	ErrInvalidTelemetry = errors.New("invalid telemetry row")
)

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// IsBusy reports whether err is SQLite's SQLITE_BUSY: another process (a
// collector writing telemetry to the same file, say) held the write lock
// past the busy timeout. Nothing was written; the same call may succeed
// when tried again.
func IsBusy(err error) bool { return sqliteCode(err)&0xff == sqlite3.SQLITE_BUSY }

// isPrimaryKeyViolation reports whether err is a duplicate primary key.
func isPrimaryKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isForeignKeyViolation reports whether err is a reference to a missing row.
func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
