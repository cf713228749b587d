package datasets

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Series is one entity's samples of one quantity (a container's GPU
// memory, a GPU's utilization), sorted by time.
type Series struct {
	ID     string      // the entity: a container, a GPU, a node
	Times  []time.Time // strictly increasing
	Values []float64   // in the unit the format documents
	// Capacity, for a series that counts idle units of a pool (GPUs of a
	// virtual cluster, nodes), is the pool's size at each sample; nil for
	// a series of a single device's measurements.
	Capacity []float64
	// Demand, where the format records it, is the queued demand at each
	// sample in the unit of Values (GPUs asked for by queued jobs); nil
	// when unknown.
	Demand []float64
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
// file may be plain or gzip. PATH may also be a folder: every regular file
// in it (not in its subfolders; names starting with a dot are skipped) is
// read, and an ID found in two files is an error naming both.
func ReadSeries(spec string) ([]Series, error) {
	name, path, ok := splitSpec(spec)
	f, known := seriesFormats[name]
	if !ok || !known {
		return nil, specError("series", spec, name, ok, known, slices.Sorted(maps.Keys(seriesFormats)))
	}
	files, err := seriesFiles(path)
	if err != nil {
		return nil, fmt.Errorf("series %s: %w", spec, err)
	}
	var out []Series
	from := map[string]string{} // series ID → file
	for _, file := range files {
		got, err := readSeriesFile(f, file)
		if err != nil {
			return nil, err
		}
		for _, s := range got {
			if prev, dup := from[s.ID]; dup {
				return nil, fmt.Errorf("series %s: series %q is in both %s and %s", spec, s.ID, prev, file)
			}
			from[s.ID] = file
		}
		out = append(out, got...)
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// seriesFiles lists path itself, or the regular files of the folder path,
// sorted by name.
func seriesFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if e.Name()[0] == '.' || !e.Type().IsRegular() {
			continue
		}
		files = append(files, filepath.Join(path, e.Name()))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("folder %s holds no files", path)
	}
	return files, nil
}

func readSeriesFile(f SeriesFormat, path string) ([]Series, error) {
	rc, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("series %s: %w", f.Name, err)
	}
	s, err := f.Read(rc, path)
	if err == nil {
		err = closeError(rc, path)
	} else {
		rc.Close()
	}
	return s, err
}
