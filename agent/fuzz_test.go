package agent

import (
	"testing"
)

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (work load) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 100000 200 18446744073709551615\n"))
	f.Add([]byte("1 ((sd-pam)) S 0 1 1\n"))
	f.Add([]byte("no parens"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseProcStat(b) // must not panic
	})
}
