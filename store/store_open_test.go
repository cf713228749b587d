package store

import (
	"context"
	"strings"
	"testing"
)

// A database where nothing can be written (sysfs takes no new files, not
// even root's) says why, not only SQLite's "unable to open database file".
func TestADatabaseThatCannotBeWrittenSaysWhy(t *testing.T) {
	_, err := Open(context.Background(), "/sys/prescient-test.db")
	if err == nil {
		t.Fatal("opened a database under /sys")
	}
	if !strings.Contains(err.Error(), "the database's folder /sys cannot be written") {
		t.Errorf("error %q; want one that names the folder that cannot be written", err)
	}
}
