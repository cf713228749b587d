package collector

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/datasets"
)

// SeriesSelector names stored telemetry as training and evaluation read
// it (--series influx:SELECTOR): a server and the query to run on it.
type SeriesSelector struct {
	Influx InfluxOptions
	Query  SeriesQuery
}

// selectorKeys are the parameters a selector may carry.
var selectorKeys = []string{"bucket", "org", "field", "start", "end", "step", "agg", "gpus"}

// ParseSeriesSelector reads a selector written as a URL,
//
//	http://[USER:PASSWORD@]HOST:PORT?bucket=DB/RP&start=DATE&end=DATE[&field=util_gpu_pct][&step=1m][&agg=mean][&gpus=UUID,UUID][&org=O]
//
// where DATE is YYYY-MM-DD or RFC 3339 (UTC without a zone). The user and
// password, when given, are the token (InfluxDB 1.8's "user:password").
// field defaults to util_gpu_pct, step to 1m, agg to mean, gpus to every
// device.
func ParseSeriesSelector(s string) (SeriesSelector, error) {
	u, err := url.Parse(s)
	if err != nil {
		return SeriesSelector{}, fmt.Errorf("influx selector: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return SeriesSelector{}, fmt.Errorf("influx selector %q: want http(s)://HOST:PORT?bucket=DB/RP&start=...&end=...", redact(u))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return SeriesSelector{}, fmt.Errorf("influx selector: query: %w", err)
	}
	for k, v := range q {
		if !slices.Contains(selectorKeys, k) {
			return SeriesSelector{}, fmt.Errorf("influx selector: parameter %q is unknown (want %s)", k, strings.Join(selectorKeys, ", "))
		}
		if len(v) > 1 {
			return SeriesSelector{}, fmt.Errorf("influx selector: parameter %q is given %d times", k, len(v))
		}
	}
	var sel SeriesSelector
	sel.Influx = InfluxOptions{URL: u.Scheme + "://" + u.Host + u.Path, Bucket: q.Get("bucket"), Org: q.Get("org")}
	if u.User != nil {
		pw, _ := u.User.Password()
		sel.Influx.Token = u.User.Username() + ":" + pw
	}
	if err := sel.Influx.Validate(); err != nil {
		return SeriesSelector{}, fmt.Errorf("influx selector: bucket: %w", err)
	}
	sq := &sel.Query
	sq.Field, sq.Agg, sq.Step = cmpOr(q.Get("field"), "util_gpu_pct"), q.Get("agg"), time.Minute
	for _, p := range []struct {
		key string
		dst *time.Time
	}{{"start", &sq.Start}, {"end", &sq.End}} {
		v := q.Get(p.key)
		if v == "" {
			return SeriesSelector{}, fmt.Errorf("influx selector: parameter %q is missing", p.key)
		}
		if *p.dst, err = datasets.ParseTime(v); err != nil {
			return SeriesSelector{}, fmt.Errorf("influx selector: parameter %q: %w", p.key, err)
		}
	}
	if v := q.Get("step"); v != "" {
		if sq.Step, err = time.ParseDuration(v); err != nil {
			return SeriesSelector{}, fmt.Errorf("influx selector: parameter \"step\": %w", err)
		}
	}
	if v := q.Get("gpus"); v != "" {
		sq.GPUs = strings.Split(v, ",")
	}
	if err := sq.Validate(); err != nil {
		return SeriesSelector{}, fmt.Errorf("influx selector: %w", err)
	}
	return sel, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redact hides a password in errors.
func redact(u *url.URL) string { return u.Redacted() }

// ReadSeries runs q on ts and returns one series per device, named
// NODE/UUID, in the field's unit.
func ReadSeries(ctx context.Context, ts TelemetryStore, q SeriesQuery) ([]datasets.Series, error) {
	got, err := ts.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]datasets.Series, 0, len(got))
	for _, s := range got {
		if len(s.Points) == 0 {
			continue
		}
		d := datasets.Series{ID: s.Node + "/" + s.GPU, Times: make([]time.Time, len(s.Points)), Values: make([]float64, len(s.Points))}
		for i, p := range s.Points {
			d.Times[i], d.Values[i] = p.Time, p.Value
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b datasets.Series) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
