package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/prescient-sched/prescient/executor/sim"
)

// plotColor is the line colour of run i.
func plotColor(i int) string {
	colors := [...]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"}
	return colors[i%len(colors)]
}

const (
	plotW, plotH = 520, 320 // one panel
	plotPad      = 50
)

// writePlot draws the runs' JCT CDFs (log-scaled hours) beside their queue
// length over time, as SVG.
func writePlot(path string, runs []*sim.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", 2*plotW+3*plotPad, plotH+2*plotPad)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	cdfPanel(w, runs, plotPad, plotPad)
	queuePanel(w, runs, 2*plotPad+plotW, plotPad)
	for i, r := range runs {
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", plotPad+10, plotPad+16*(i+1), plotColor(i), r.Policy)
	}
	fmt.Fprintln(w, "</svg>")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func axes(w io.Writer, x0, y0 int, title, xlabel, ylabel string) {
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", x0, y0, plotW, plotH)
	fmt.Fprintf(w, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0-8, title)
	fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", x0+plotW/2-40, y0+plotH+30, xlabel)
	fmt.Fprintf(w, `<text x="%d" y="%d" transform="rotate(-90 %d %d)">%s</text>`+"\n", x0-30, y0+plotH/2, x0-30, y0+plotH/2, ylabel)
}

// cdfPanel: x is log10 of JCT hours from 10^-3 to the largest.
func cdfPanel(w io.Writer, runs []*sim.Result, x0, y0 int) {
	lo, hi := -3.0, 0.0
	for _, r := range runs {
		if n := len(r.JCTs); n > 0 {
			hi = math.Max(hi, math.Ceil(math.Log10(math.Max(r.JCTs[n-1].Hours(), 1e-3))))
		}
	}
	axes(w, x0, y0, "JCT CDF", fmt.Sprintf("JCT, hours (log, 1e%.0f..1e%.0f)", lo, hi), "fraction of jobs")
	for i, r := range runs {
		n := len(r.JCTs)
		step := max(n/400, 1)
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" points="`, plotColor(i))
		for k := 0; k < n; k += step {
			x := (math.Log10(math.Max(r.JCTs[k].Hours(), 1e-3)) - lo) / (hi - lo)
			fmt.Fprintf(w, "%.1f,%.1f ", float64(x0)+x*plotW, float64(y0+plotH)-float64(k+1)/float64(n)*plotH)
		}
		fmt.Fprintln(w, `"/>`)
	}
}

func queuePanel(w io.Writer, runs []*sim.Result, x0, y0 int) {
	maxQ, span := 1, 1.0
	for _, r := range runs {
		for _, p := range r.Queue {
			maxQ = max(maxQ, p.Queued)
		}
		if n := len(r.Queue); n > 0 {
			span = math.Max(span, r.Queue[n-1].Time.Sub(r.Queue[0].Time).Hours())
		}
	}
	axes(w, x0, y0, "Queue length", fmt.Sprintf("hours since first submit (0..%.0f)", span), fmt.Sprintf("queued jobs (0..%d)", maxQ))
	for i, r := range runs {
		if len(r.Queue) == 0 {
			continue
		}
		t0 := r.Queue[0].Time
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" points="`, plotColor(i))
		step := max(len(r.Queue)/600, 1)
		for k := 0; k < len(r.Queue); k += step {
			p := r.Queue[k]
			x := p.Time.Sub(t0).Hours() / span
			fmt.Fprintf(w, "%.1f,%.1f ", float64(x0)+x*plotW, float64(y0+plotH)-float64(p.Queued)/float64(maxQ)*plotH)
		}
		fmt.Fprintln(w, `"/>`)
	}
}
