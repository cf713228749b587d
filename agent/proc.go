package agent

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procStat is what the agent reads of /proc/PID/stat.
type procStat struct {
	State      byte
	PPID       int
	PGRP       int
	StartTicks uint64
}

// readProcStat reads /proc/PID/stat under root.
func readProcStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", root, pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses /proc/PID/stat: "pid (comm) state ppid pgrp ...",
// where comm may hold spaces and parentheses, so the fields are counted
// from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("proc stat: no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("proc stat: %d fields after the command name, want at least 20", len(f))
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("proc stat: ppid %q, pgrp %q or start time %q is not a number", f[1], f[2], f[19])
	}
	return procStat{State: f[0][0], PPID: ppid, PGRP: pgrp, StartTicks: start}, nil
}

// alive reports whether pid still runs the process that started at
// startTicks (not a zombie, not a later process with the same PID).
func alive(root string, pid int, startTicks uint64) bool {
	st, err := readProcStat(root, pid)
	return err == nil && st.StartTicks == startTicks && st.State != 'Z' && st.State != 'X'
}
