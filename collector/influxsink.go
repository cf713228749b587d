package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	influxhttp "github.com/influxdata/influxdb-client-go/v2/api/http"
)

// InfluxOptions say where the InfluxDB sink writes.
type InfluxOptions struct {
	URL    string
	Token  string // "" or "user:password" on InfluxDB 1.8
	Org    string // ignored by InfluxDB 1.8
	Bucket string // "database/retention_policy" on InfluxDB 1.8
	// Timeout bounds one HTTP request; default 10s.
	Timeout time.Duration
}

// Validate checks the options.
func (o InfluxOptions) Validate() error {
	if o.URL == "" {
		return errors.New("influx: no URL")
	}
	if _, _, err := SplitBucket(o.Bucket); err != nil {
		return fmt.Errorf("influx: %w", err)
	}
	return nil
}

// InfluxSink writes samples to InfluxDB through influxdb-client-go's HTTP
// service (its authentication, error decoding and Retry-After handling),
// one gzip-compressed request per batch, with no retries of its own. It
// compresses at gzip.BestSpeed itself rather than through the client's
// write API, which compresses at the default level: on a small collector
// host the CPU that saves is worth more than the bytes. It is safe for
// concurrent use. Before its
// first write it makes sure the bucket exists (EnsureBucket), and again
// after the server says the bucket is missing.
type InfluxSink struct {
	o        InfluxOptions
	client   influxdb2.Client
	writeURL string
	hc       *http.Client

	mu      sync.Mutex
	ensured bool
	bufs    sync.Pool // *encodeBuf
}

// encodeBuf is one batch's line protocol and its compressed form.
type encodeBuf struct {
	lp []byte
	gz bytes.Buffer
	zw *gzip.Writer
}

var _ Sink = (*InfluxSink)(nil)

// NewInfluxSink makes a sink; it does not reach the server yet.
func NewInfluxSink(o InfluxOptions) (*InfluxSink, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	opts := influxdb2.DefaultOptions().
		SetHTTPRequestTimeout(uint(max(o.Timeout/time.Second, 1))).
		SetMaxRetries(0) // Writer retries, and spools what it cannot write
	client := influxdb2.NewClientWithOptions(o.URL, o.Token, opts)
	params := url.Values{"org": {o.Org}, "bucket": {o.Bucket}, "precision": {"ns"}}
	return &InfluxSink{
		o:        o,
		client:   client,
		writeURL: client.HTTPService().ServerAPIURL() + "write?" + params.Encode(),
		hc:       &http.Client{Timeout: o.Timeout},
	}, nil
}

// Write encodes the batch as line protocol and posts it.
func (s *InfluxSink) Write(ctx context.Context, batch []Sample) error {
	if err := s.ensureBucket(ctx); err != nil {
		return err
	}
	eb, _ := s.bufs.Get().(*encodeBuf)
	if eb == nil {
		eb = &encodeBuf{}
		eb.zw, _ = gzip.NewWriterLevel(&eb.gz, gzip.BestSpeed)
	}
	defer s.bufs.Put(eb)
	var n int
	eb.lp, n = AppendLineProtocol(eb.lp[:0], batch)
	if n == 0 {
		return nil
	}
	eb.gz.Reset()
	eb.zw.Reset(&eb.gz)
	if _, err := eb.zw.Write(eb.lp); err != nil {
		return fmt.Errorf("influx: compress: %w", err)
	}
	if err := eb.zw.Close(); err != nil {
		return fmt.Errorf("influx: compress: %w", err)
	}
	herr := s.client.HTTPService().DoPostRequest(ctx, s.writeURL, bytes.NewReader(eb.gz.Bytes()),
		func(req *http.Request) {
			req.Header.Set("Content-Encoding", "gzip")
			req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		},
		func(res *http.Response) error { return res.Body.Close() })
	if herr == nil {
		return nil
	}
	return s.classify(herr, len(batch))
}

// ensureBucket runs EnsureBucket until it has succeeded once.
func (s *InfluxSink) ensureBucket(ctx context.Context) error {
	s.mu.Lock()
	done := s.ensured
	s.mu.Unlock()
	if done {
		return nil
	}
	if _, err := EnsureBucket(ctx, s.hc, s.o.URL, s.o.Token, s.o.Bucket); err != nil {
		return err
	}
	s.mu.Lock()
	s.ensured = true
	s.mu.Unlock()
	return nil
}

// droppedRe finds InfluxDB 1.x's count of points a partial write dropped.
var droppedRe = regexp.MustCompile(`dropped=(\d+)`)

// classify tells permanent refusals from passing failures. 400, 413 and
// 422 are permanent: InfluxDB 1.8 has stored the points that parsed and
// says how many it dropped. A missing bucket (404) is passing: the bucket
// is created again before the next try. 401 and 403 wrap ErrUnauthorized:
// the samples are kept until the token is fixed.
func (s *InfluxSink) classify(err error, batch int) error {
	var he *influxhttp.Error
	if !errors.As(err, &he) {
		return fmt.Errorf("influx %s: write: %w", s.o.URL, err)
	}
	switch he.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		n := batch
		if m := droppedRe.FindStringSubmatch(he.Message); m != nil {
			if d, convErr := strconv.Atoi(m[1]); convErr == nil && d <= batch {
				n = d
			}
		}
		return &RejectedError{Samples: n, Err: fmt.Errorf("influx %s: HTTP %d: %s", s.o.URL, he.StatusCode, he.Message)}
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("influx %s: HTTP %d: %s: %w", s.o.URL, he.StatusCode, he.Message, ErrUnauthorized)
	case http.StatusNotFound:
		s.mu.Lock()
		s.ensured = false
		s.mu.Unlock()
	}
	return fmt.Errorf("influx %s: write: %w", s.o.URL, err)
}

// Close closes the client's connections.
func (s *InfluxSink) Close() error {
	s.client.Close()
	return nil
}
