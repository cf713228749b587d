package datasets

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Series is one entity's samples of one quantity (a container's GPU
// memory, a GPU's utilization), sorted by time.
type Series struct {
	ID     string      // the entity: a container, a GPU, a node
	Times  []time.Time // strictly increasing
	Values []float64   // in the unit the format documents
}

// SeriesFormat is a telemetry series format that ReadSeries knows by name.
type SeriesFormat struct {
	Name string // as written before the colon of a spec
	Doc  string // one line for help texts: what the values are, in what unit
	// Read parses a whole file; file names it in errors. r yields plain
	// text: ReadSeries (through OpenFile) takes care of gzip.
	Read func(r io.Reader, file string) ([]Series, error)
}

// seriesFormats is filled from the formats' init functions, like the trace
// and fleet registries; nothing changes it afterwards.
var seriesFormats = map[string]SeriesFormat{}

func registerSeries(f SeriesFormat) {
	if _, dup := seriesFormats[f.Name]; dup {
		panic("datasets: series format " + f.Name + " registered twice")
	}
	seriesFormats[f.Name] = f
}

// SeriesFormats lists the series formats, sorted by name.
func SeriesFormats() []SeriesFormat { return sortedValues(seriesFormats) }

// ReadSeries reads the series named by spec, "FORMAT:PATH", e.g.
// "genai-memory:pod_gpu_memory_used_bytes_anon.csv.gz", sorted by ID. The
// file may be plain or gzip.
func ReadSeries(spec string) ([]Series, error) {
	name, path, ok := splitSpec(spec)
	f, known := seriesFormats[name]
	if !ok || !known {
		return nil, specError("series", spec, name, ok, known, slices.Sorted(maps.Keys(seriesFormats)))
	}
	rc, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("series %s: %w", spec, err)
	}
	s, err := f.Read(rc, path)
	if err == nil {
		err = closeError(rc, path)
	} else {
		rc.Close()
	}
	return s, err
}
