package nvml

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// CDF is an empirical distribution given by points (percent, value) with
// percent rising from 0 to 100 and value not falling.
type CDF struct {
	Unit    string
	Percent []float64
	Value   []float64
}

// Quantile returns the value at probability u in [0, 1], interpolating
// linearly between the points.
func (c CDF) Quantile(u float64) float64 {
	p := u * 100
	i := sort.SearchFloat64s(c.Percent, p)
	switch {
	case i == 0:
		return c.Value[0]
	case i >= len(c.Percent):
		return c.Value[len(c.Value)-1]
	}
	p0, p1 := c.Percent[i-1], c.Percent[i]
	if p1 == p0 {
		return c.Value[i]
	}
	return c.Value[i-1] + (c.Value[i]-c.Value[i-1])*(p-p0)/(p1-p0)
}

// Prob returns the share of the distribution at or below v (in [0, 1]).
func (c CDF) Prob(v float64) float64 {
	// The last point whose value is <= v.
	i := sort.Search(len(c.Value), func(i int) bool { return c.Value[i] > v })
	if i == 0 {
		return 0
	}
	return c.Percent[i-1] / 100
}

// percentSlack is how far a CDF's percent may fall, by rounding, between
// two rows: PAI's 74-point table falls by up to 0.34.
const percentSlack = 0.5

// CDFs are the distributions of one file, keyed by cluster and metric.
type CDFs map[CDFKey]CDF

// CDFKey names a distribution: the cluster ("seren") and the metric
// ("gpu_util").
type CDFKey struct{ Cluster, Metric string }

// ReadCDFFile reads an AcmeTrace CDF table (acme_util_cdfs.csv).
func ReadCDFFile(path string) (CDFs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCDFs(f, path)
}

// ReadCDFs reads CSV rows "cluster,metric,unit,cdf_percent,value" after a
// header naming those columns. Within one (cluster, metric) the percent
// must rise from 0 to 100 and the value must not fall. Errors name the
// file and line.
func ReadCDFs(r io.Reader, name string) (CDFs, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 5
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: header: %w", name, err)
	}
	want := []string{"cluster", "metric", "unit", "cdf_percent", "value"}
	for i, h := range header {
		if strings.TrimSpace(h) != want[i] {
			return nil, fmt.Errorf("%s:1: header column %d is %q, want %q (columns: %s)", name, i+1, h, want[i], strings.Join(want, ","))
		}
	}
	out := CDFs{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err) // csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		k := CDFKey{Cluster: rec[0], Metric: rec[1]}
		if k.Cluster == "" || k.Metric == "" {
			return nil, fmt.Errorf("%s:%d: empty cluster or metric", name, line)
		}
		p, err := strconv.ParseFloat(rec[3], 64)
		if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
			return nil, fmt.Errorf("%s:%d: cdf_percent %q: want a number from 0 to 100", name, line, rec[3])
		}
		v, err := strconv.ParseFloat(rec[4], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s:%d: value %q: want a finite number", name, line, rec[4])
		}
		c := out[k]
		if n := len(c.Percent); n > 0 {
			// Percents that fall by a rounding error (PAI's table has
			// 36.0738 then 36.0725) are taken as equal.
			if p < c.Percent[n-1] && p > c.Percent[n-1]-percentSlack {
				p = c.Percent[n-1]
			}
			if p < c.Percent[n-1] || v < c.Value[n-1] {
				return nil, fmt.Errorf("%s:%d: %s/%s: point (%g%%, %g) falls below the one before (%g%%, %g): a CDF never falls", name, line, k.Cluster, k.Metric, p, v, c.Percent[n-1], c.Value[n-1])
			}
		} else {
			c.Unit = rec[2]
		}
		c.Percent = append(c.Percent, p)
		c.Value = append(c.Value, v)
		out[k] = c
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	for k, c := range out {
		if last := c.Percent[len(c.Percent)-1]; last < 99 {
			return nil, fmt.Errorf("%s: %s/%s: the points end at %g%%, want them to reach 100%%", name, k.Cluster, k.Metric, last)
		}
	}
	return out, nil
}

// Get returns the distribution of cluster and metric, or an error naming
// what is missing.
func (c CDFs) Get(cluster, metric string) (CDF, error) {
	d, ok := c[CDFKey{cluster, metric}]
	if !ok {
		return CDF{}, fmt.Errorf("no CDF for cluster %q, metric %q", cluster, metric)
	}
	return d, nil
}
