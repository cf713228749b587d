package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// progress draws a progress bar for long work (a model's fit, a replay) on
// one terminal line of stderr; it stays silent when stderr is not a terminal
// or logs are JSON, so that scripts and log collectors see only the logs.
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	on   bool
	last time.Time
	line bool
}

func newProgress(w io.Writer, g *globals) *progress {
	on := false
	if f, ok := w.(*os.File); ok && strings.EqualFold(g.logFormat, "text") {
		on = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
	}
	return &progress{w: w, on: on}
}

// update shows done of total for label; it redraws at most every 100 ms.
func (p *progress) update(label string, done, total int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done < total && time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	width := 30
	filled := width * done / max(total, 1)
	fmt.Fprintf(p.w, "\r%-16s [%s%s] %d/%d", label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total)
	p.line = true
}

// done clears the line, so that what follows starts on a clean one.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line {
		fmt.Fprint(p.w, "\r\033[K")
		p.line = false
	}
}
