package collector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
)

// TelemetryStore answers series queries over stored telemetry; training
// and the predictor read through it.
type TelemetryStore interface {
	Query(ctx context.Context, q SeriesQuery) ([]Series, error)
}

// SeriesQuery asks for one field of the gpu measurement for a set of
// devices over [Start, End), aggregated over windows of Step. Windows are
// aligned to multiples of Step since the Unix epoch and labelled with
// their start (the first with Start when Start is not aligned); windows
// without values are left out.
type SeriesQuery struct {
	Field      string   // a Fields name: "power_w", "util_gpu_pct", ...
	GPUs       []string // device UUIDs; none means every device
	Start, End time.Time
	Step       time.Duration
	Agg        string // "mean" (default), "max", "min" or "last"
}

// Validate checks the query.
func (q SeriesQuery) Validate() error {
	if _, ok := FieldByName(q.Field); !ok {
		names := make([]string, len(Fields))
		for i, f := range Fields {
			names[i] = f.Name
		}
		return fmt.Errorf("field %q: want one of %s", q.Field, strings.Join(names, ", "))
	}
	if q.Step <= 0 {
		return fmt.Errorf("step %s: want a positive duration", q.Step)
	}
	if !q.End.After(q.Start) {
		return fmt.Errorf("range [%s, %s) is empty", q.Start.Format(time.RFC3339Nano), q.End.Format(time.RFC3339Nano))
	}
	switch q.Agg {
	case "", "mean", "max", "min", "last":
		return nil
	}
	return fmt.Errorf("aggregate %q: want mean, max, min or last", q.Agg)
}

// Series is one device's values.
type Series struct {
	GPU    string // UUID
	Node   string
	Model  string // the GPU model the samples name ("" when none does)
	Points []Point
}

// Point is one window's value.
type Point struct {
	Time  time.Time
	Value float64
}

// InfluxQuery answers series queries from InfluxDB with Flux.
type InfluxQuery struct {
	o      InfluxOptions
	client influxdb2.Client
}

var _ TelemetryStore = (*InfluxQuery)(nil)

// NewInfluxQuery makes a query client.
func NewInfluxQuery(o InfluxOptions) (*InfluxQuery, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	opts := influxdb2.DefaultOptions().SetHTTPRequestTimeout(uint(o.Timeout / time.Second))
	return &InfluxQuery{o: o, client: influxdb2.NewClientWithOptions(o.URL, o.Token, opts)}, nil
}

// Close closes the client's connections.
func (q *InfluxQuery) Close() { q.client.Close() }

// Flux returns the Flux program that answers sq.
func (q *InfluxQuery) Flux(sq SeriesQuery) string {
	fn := sq.Agg
	if fn == "" {
		fn = "mean"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "from(bucket: %s)\n", strconv.Quote(q.o.Bucket))
	fmt.Fprintf(&b, "  |> range(start: %s, stop: %s)\n", sq.Start.UTC().Format(time.RFC3339Nano), sq.End.UTC().Format(time.RFC3339Nano))
	// InfluxDB 1.8 returns points at the stop time too: keep [Start, End).
	fmt.Fprintf(&b, "  |> filter(fn: (r) => r._measurement == %s and r._field == %s and r._time < %s)\n",
		strconv.Quote(MeasurementGPU), strconv.Quote(sq.Field), sq.End.UTC().Format(time.RFC3339Nano))
	if len(sq.GPUs) > 0 {
		b.WriteString("  |> filter(fn: (r) => ")
		for i, g := range sq.GPUs {
			if i > 0 {
				b.WriteString(" or ")
			}
			fmt.Fprintf(&b, "r.gpu_uuid == %s", strconv.Quote(g))
		}
		b.WriteString(")\n")
	}
	b.WriteString("  |> keep(columns: [\"_time\", \"_value\", \"_start\", \"_stop\", \"gpu_uuid\", \"node\", \"model\"])\n")
	b.WriteString("  |> group(columns: [\"gpu_uuid\", \"node\", \"model\"])\n")
	b.WriteString("  |> toFloat()\n")
	fmt.Fprintf(&b, "  |> aggregateWindow(every: %dns, fn: %s, createEmpty: false, timeSrc: \"_start\")\n", sq.Step.Nanoseconds(), fn)
	return b.String()
}

// Query runs the Flux program and gathers one series per device, ordered
// by UUID.
func (q *InfluxQuery) Query(ctx context.Context, sq SeriesQuery) ([]Series, error) {
	if err := sq.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry query: %w", err)
	}
	res, err := q.client.QueryAPI(q.o.Org).Query(ctx, q.Flux(sq))
	if err != nil {
		return nil, fmt.Errorf("telemetry query: influx %s: %w", q.o.URL, err)
	}
	defer res.Close()
	byGPU := map[string]int{}
	var out []Series
	for res.Next() {
		r := res.Record()
		uuid, _ := r.ValueByKey("gpu_uuid").(string)
		node, _ := r.ValueByKey("node").(string)
		model, _ := r.ValueByKey("model").(string)
		v, ok := r.Value().(float64)
		if !ok {
			continue
		}
		key := uuid + "\x00" + node
		i, seen := byGPU[key]
		if !seen {
			i = len(out)
			byGPU[key] = i
			out = append(out, Series{GPU: uuid, Node: node})
		}
		if model != "" {
			out[i].Model = model
		}
		out[i].Points = append(out[i].Points, Point{Time: r.Time().UTC(), Value: v})
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("telemetry query: influx %s: %w", q.o.URL, err)
	}
	sortSeries(out)
	return out, nil
}

func sortSeries(s []Series) {
	// Few series: insertion sort keeps the dependency list short.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && (s[j].GPU < s[j-1].GPU || s[j].GPU == s[j-1].GPU && s[j].Node < s[j-1].Node); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
