package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
)

// sendLog answers a log command with the tail of the attempt's log on
// this node.
func (a *Agent) sendLog(ctx context.Context, c protocol.Command) {
	reply := protocol.LogReply{ID: c.Log.ID}
	path := filepath.Join(attemptDir(a.jobDir(c.Job), c.Attempt), jobLogName)
	text, truncated, err := tail(path, c.Log.MaxBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		reply.Error = fmt.Sprintf("node %s has no log of job %s attempt %d", a.cfg.Node.Name, c.Job, c.Attempt)
	case err != nil:
		reply.Error = fmt.Sprintf("node %s: reading the log: %v", a.cfg.Node.Name, err)
	default:
		reply.Text, reply.Truncated = text, truncated
	}
	var resp protocol.LogReplyResponse
	if err := a.do(ctx, http.MethodPost, fmt.Sprintf(protocol.PathLogs, url.PathEscape(a.cfg.Node.Name)), reply, &resp, 15*time.Second); err != nil {
		a.log.Warn("log not sent", "job", c.Job, "attempt", c.Attempt, "error", err)
	}
}

// tail reads the last max bytes of the file at path; when the file is
// longer, the text starts after the first line break in them (a whole
// line), unless they hold none.
func tail(path string, max int) (text string, truncated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	from := st.Size() - int64(max)
	if from > 0 {
		truncated = true
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return "", false, err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	if err != nil {
		return "", false, err
	}
	if truncated {
		return protocol.FromWholeLine(string(b)), true, nil
	}
	return string(b), false, nil
}
