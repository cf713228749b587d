package datasets

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
)

// TraceFormat is a job trace format that ReadTrace knows by name.
type TraceFormat struct {
	Name string // as written before the colon of a spec
	Doc  string // one line for help texts
	// Read parses a whole trace; file names it in errors. r yields plain
	// text: ReadTrace (through OpenFile) takes care of gzip.
	Read func(r io.Reader, file string, opt ReadOptions) (Result, error)
}

// FleetFormat is a fleet description format that ReadFleet knows by name.
type FleetFormat struct {
	Name string // as written before the colon of a spec
	Doc  string // one line for help texts
	// Open builds the fleet from the part of the spec after "FORMAT:",
	// a path for file formats.
	Open func(spec string) (*cluster.Fleet, error)
}

// The registries are the package's only mutable state. Each format's file
// adds itself from its init function; nothing changes them afterwards.
var (
	traceFormats = map[string]TraceFormat{}
	fleetFormats = map[string]FleetFormat{}
)

func registerTrace(f TraceFormat) {
	if _, dup := traceFormats[f.Name]; dup {
		panic("datasets: trace format " + f.Name + " registered twice")
	}
	traceFormats[f.Name] = f
}

func registerFleet(f FleetFormat) {
	if _, dup := fleetFormats[f.Name]; dup {
		panic("datasets: fleet format " + f.Name + " registered twice")
	}
	fleetFormats[f.Name] = f
}

// TraceFormats lists the trace formats, sorted by name.
func TraceFormats() []TraceFormat { return sortedValues(traceFormats) }

// FleetFormats lists the fleet formats, sorted by name.
func FleetFormats() []FleetFormat { return sortedValues(fleetFormats) }

func sortedValues[F any](m map[string]F) []F {
	out := make([]F, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[name])
	}
	return out
}

// ReadTrace reads the trace named by spec, "FORMAT:PATH", e.g.
// "philly:data/philly_jobs.csv". The file may be plain or gzip.
func ReadTrace(spec string, opt ReadOptions) (Result, error) {
	name, path, ok := splitSpec(spec)
	f, known := traceFormats[name]
	if !ok || !known {
		return Result{}, specError("trace", spec, name, ok, known, slices.Sorted(maps.Keys(traceFormats)))
	}
	rc, err := OpenFile(path)
	if err != nil {
		return Result{}, fmt.Errorf("trace %s: %w", spec, err)
	}
	res, err := f.Read(rc, path, opt)
	if err == nil {
		err = closeError(rc, path)
	} else {
		rc.Close()
	}
	return res, err
}

// ReadFleet builds the fleet named by spec, "FORMAT:SPEC", e.g.
// "philly:cluster_machine_list.csv" or "uniform:16x8:A100-SXM4-80GB".
func ReadFleet(spec string) (*cluster.Fleet, error) {
	name, rest, ok := splitSpec(spec)
	f, known := fleetFormats[name]
	if !ok || !known {
		return nil, specError("fleet", spec, name, ok, known, slices.Sorted(maps.Keys(fleetFormats)))
	}
	return f.Open(rest)
}

// readFleetFile opens a plain or gzip fleet file and parses it with read.
func readFleetFile(path string, read func(r io.Reader, file string) (*cluster.Fleet, error)) (*cluster.Fleet, error) {
	rc, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	fleet, err := read(rc, path)
	if err != nil {
		rc.Close()
		return nil, err
	}
	if err := closeError(rc, path); err != nil {
		return nil, err
	}
	return fleet, nil
}

// closeError closes rc after a successful read.
func closeError(rc io.Closer, path string) error {
	if err := rc.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

func specError(kind, spec, name string, ok, known bool, names []string) error {
	want := fmt.Sprintf("want FORMAT:PATH with FORMAT one of %s", strings.Join(names, ", "))
	if !ok {
		return fmt.Errorf("%s spec %q: %s", kind, spec, want)
	}
	return fmt.Errorf("%s spec %q: unknown format %q (%s)", kind, spec, name, want)
}

// splitSpec splits "FORMAT:REST" at the first colon; ok is false when
// either side is empty.
func splitSpec(spec string) (format, rest string, ok bool) {
	format, rest, ok = strings.Cut(spec, ":")
	return strings.TrimSpace(format), rest, ok && format != "" && rest != ""
}
