package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// WriterOptions tune the Writer.
type WriterOptions struct {
	// BatchSize is how many samples make a batch; default 5000.
	BatchSize int
	// FlushInterval is the longest a sample waits in memory; default 1s.
	FlushInterval time.Duration
	// RetryFor is how long a fresh batch is retried before it goes to the
	// spool; default 2s.
	RetryFor time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between tries; defaults 50ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Concurrency is how many fresh batches may be in flight at once;
	// default 2, so that one batch is encoded and compressed while the
	// database takes the other.
	Concurrency int
}

func (o *WriterOptions) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 5000
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.RetryFor <= 0 {
		o.RetryFor = 2 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 2
	}
}

// Writer is the one place where batching, retries and the spool live. It
// gathers samples into batches and writes them to the sink, up to
// Concurrency batches at once (so batches in flight together may land in
// either order; every point carries its time). A batch that fails for a
// passing reason is retried with jittered exponential backoff for
// RetryFor, then spooled, in the order the batches were made; while the
// spool holds anything, new batches join it at the end, and one replay
// loop writes the spool back, oldest batch first, as soon as the sink
// takes writes again. A batch the sink rejects
// as malformed is logged, counted and dropped.
type Writer struct {
	sink    Sink
	spool   *Spool // nil: batches that cannot be written are dropped
	o       WriterOptions
	metrics *Metrics
	log     *slog.Logger

	mu      sync.Mutex
	pending []Sample
	nextSeq uint64 // sequence number of the next batch, under mu
	batches chan batch

	// Batches reach the spool in sequence order even when several are in
	// flight: a batch spools only once every earlier batch is done
	// (written, rejected or spooled).
	seqMu     sync.Mutex
	seqCond   *sync.Cond
	doneBelow uint64          // every batch below this is done
	doneAbove map[uint64]bool // done batches at or above doneBelow
	kick      chan struct{}   // wakes the replay loop
	stop      chan struct{}
	wg        sync.WaitGroup
	closed    bool

	rngMu sync.Mutex // not mu: Add may hold mu while the sender backs off
	rng   *rand.Rand
}

// NewWriter starts a writer. Its loops run until Close.
func NewWriter(sink Sink, spool *Spool, o WriterOptions, m *Metrics, log *slog.Logger) *Writer {
	o.defaults()
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{sink: sink, spool: spool, o: o, metrics: m, log: log.With("component", "collector.writer"),
		batches: make(chan batch, 4), doneAbove: map[uint64]bool{}, kick: make(chan struct{}, 1), stop: make(chan struct{}),
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	w.seqCond = sync.NewCond(&w.seqMu)
	if spool != nil {
		spool.onDrop = func(samples int, _ int64) { m.Dropped.WithLabelValues("spool_full").Add(float64(samples)) }
		spool.onCorrupt = func(samples int) {
			m.Errors.WithLabelValues("spool", "corrupt_record").Inc()
			m.Dropped.WithLabelValues("spool_corrupt").Add(float64(samples))
		}
		m.SpoolBytes.Set(float64(spool.Bytes()))
		spool.mu.Lock()
		m.Errors.WithLabelValues("spool", "corrupt_record").Add(float64(spool.corruptAtOpen))
		spool.corruptAtOpen = 0
		spool.mu.Unlock()
	}
	w.wg.Add(1 + o.Concurrency)
	for range o.Concurrency {
		go w.sendLoop()
	}
	go w.replayLoop()
	return w
}

// Add queues samples; a full batch is handed to the sender at once.
func (w *Writer) Add(samples ...Sample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.pending = append(w.pending, samples...)
	for len(w.pending) >= w.o.BatchSize {
		w.enqueue(w.pending[:w.o.BatchSize:w.o.BatchSize])
		w.pending = w.pending[w.o.BatchSize:]
	}
}

// batch is a batch of samples with its sequence number.
type batch struct {
	seq     uint64
	samples []Sample
}

// enqueue numbers b and hands it to the senders; the caller holds mu.
func (w *Writer) enqueue(b []Sample) {
	w.batches <- batch{seq: w.nextSeq, samples: b}
	w.nextSeq++
}

// done marks batch seq as written, rejected or spooled.
func (w *Writer) done(seq uint64) {
	w.seqMu.Lock()
	defer w.seqMu.Unlock()
	w.doneAbove[seq] = true
	for w.doneAbove[w.doneBelow] {
		delete(w.doneAbove, w.doneBelow)
		w.doneBelow++
	}
	w.seqCond.Broadcast()
}

// waitTurn waits until every batch before seq is done.
func (w *Writer) waitTurn(seq uint64) {
	w.seqMu.Lock()
	defer w.seqMu.Unlock()
	for w.doneBelow < seq {
		w.seqCond.Wait()
	}
}

// flushPending hands what is pending to the sender.
func (w *Writer) flushPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) > 0 && !w.closed {
		w.enqueue(w.pending)
		w.pending = nil
	}
}

// sendLoop writes fresh batches in order; every FlushInterval it flushes
// what is pending.
func (w *Writer) sendLoop() {
	defer w.wg.Done()
	tick := time.NewTicker(w.o.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case b, ok := <-w.batches:
			if !ok {
				return
			}
			w.send(b)
		case <-tick.C:
			go w.flushPending() // not inline: Add may be waiting on a full channel
		}
	}
}

// send writes a fresh batch, or spools it behind what the spool holds.
func (w *Writer) send(bt batch) {
	defer w.done(bt.seq)
	b := bt.samples
	if w.spool != nil && w.spool.Bytes() > 0 {
		w.waitTurn(bt.seq)
		w.toSpool(b)
		return
	}
	deadline := time.Now().Add(w.o.RetryFor)
	backoff := w.o.MinBackoff
	for {
		err := w.write(b)
		if err == nil {
			return
		}
		if !time.Now().Add(backoff).Before(deadline) {
			w.logFailure("sink unavailable: spooling the batch", err, "samples", len(b))
			w.waitTurn(bt.seq)
			w.toSpool(b)
			return
		}
		if !w.sleep(w.jitter(backoff)) {
			w.waitTurn(bt.seq)
			w.toSpool(b) // closing: keep it for the next run
			return
		}
		backoff = min(2*backoff, w.o.MaxBackoff)
	}
}

// write makes one attempt. A rejected batch counts as done: it is logged,
// counted and dropped, and write returns nil.
func (w *Writer) write(b []Sample) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := w.sink.Write(ctx, b)
	w.metrics.WriteSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		w.metrics.Written.Add(float64(len(b)))
		return nil
	}
	if n, ok := isRejected(err); ok {
		w.log.Error("the database rejected samples as malformed; they are dropped", "samples", n, "batch", len(b), "error", err)
		w.metrics.Rejected.Add(float64(n))
		w.metrics.Written.Add(float64(len(b) - n))
		w.metrics.Errors.WithLabelValues("sink", "rejected").Inc()
		return nil
	}
	w.metrics.Errors.WithLabelValues("sink", "write").Inc()
	return err
}

func (w *Writer) toSpool(b []Sample) {
	if w.spool == nil {
		w.log.Error("sink unavailable and no spool: samples dropped", "samples", len(b))
		w.metrics.Dropped.WithLabelValues("no_spool").Add(float64(len(b)))
		return
	}
	if err := w.spool.Append(b); err != nil {
		w.log.Error("spool append failed: samples dropped", "samples", len(b), "error", err)
		w.metrics.Errors.WithLabelValues("spool", "append").Inc()
		w.metrics.Dropped.WithLabelValues("spool_append").Add(float64(len(b)))
		return
	}
	w.metrics.SpoolBytes.Set(float64(w.spool.Bytes()))
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// replayLoop writes the spool back, oldest batch first, backing off while
// the sink fails.
func (w *Writer) replayLoop() {
	defer w.wg.Done()
	if w.spool == nil {
		<-w.stop
		return
	}
	backoff := w.o.MinBackoff
	for {
		select {
		case <-w.stop: // closing: what the spool holds stays for the next run
			return
		default:
		}
		b, token, ok, err := w.spool.Peek()
		if err != nil {
			w.log.Error("spool read failed; retrying", "error", err, "retry_in", backoff)
			w.metrics.Errors.WithLabelValues("spool", "read").Inc()
			if !w.sleep(w.jitter(backoff)) {
				return
			}
			backoff = min(2*backoff, w.o.MaxBackoff)
			continue
		}
		if !ok {
			w.metrics.SpoolBytes.Set(float64(w.spool.Bytes()))
			select {
			case <-w.kick:
				continue
			case <-w.stop:
				return
			}
		}
		if err := w.write(b); err != nil {
			w.logFailure("spool replay: sink still unavailable", err, "retry_in", backoff)
			if !w.sleep(w.jitter(backoff)) {
				return
			}
			backoff = min(2*backoff, w.o.MaxBackoff)
			continue
		}
		backoff = w.o.MinBackoff
		if err := w.spool.Ack(token, len(b)); err != nil {
			w.log.Error("spool ack failed: the batch may be written again after a restart", "error", err)
			w.metrics.Errors.WithLabelValues("spool", "ack").Inc()
		}
		w.metrics.SpoolBytes.Set(float64(w.spool.Bytes()))
	}
}

// logFailure logs a failed write: as an error when the database refuses the
// token (an operator must act), else as a passing outage.
func (w *Writer) logFailure(msg string, err error, args ...any) {
	args = append(args, "error", err)
	if errors.Is(err, ErrUnauthorized) {
		w.log.Error(msg+": the database refuses the token; samples are kept until it is fixed", args...)
		w.metrics.Errors.WithLabelValues("sink", "unauthorized").Inc()
		return
	}
	w.log.Warn(msg, args...)
}

// jitter returns a duration uniform in [d/2, d).
func (w *Writer) jitter(d time.Duration) time.Duration {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return d/2 + time.Duration(w.rng.Int64N(int64(d/2)+1))
}

// sleep waits d; it returns false when the writer is closing.
func (w *Writer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stop:
		return false
	}
}

// Close writes what is pending, once, and spools it when that fails; it
// stops the replay loop (what the spool holds stays for the next run) and
// closes the sink. ctx bounds the wait.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	pending, seq := w.pending, w.nextSeq
	w.pending = nil
	w.closed = true
	w.mu.Unlock()
	// The sender finishes the batches it has: with stop closed, a failing
	// batch goes straight to the spool after one try.
	close(w.stop)
	if len(pending) > 0 {
		w.batches <- batch{seq: seq, samples: pending}
	}
	close(w.batches)
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("collector: writer close: %w", ctx.Err())
	}
	if w.spool != nil {
		err = errors.Join(err, w.spool.Close())
		w.metrics.SpoolBytes.Set(float64(w.spool.Bytes()))
	}
	return errors.Join(err, w.sink.Close())
}
