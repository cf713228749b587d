package training

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/models/idle"

	"github.com/prescient-sched/prescient/internal/fsutil"
)

// DefaultKeep is how many versions of each target a registry keeps.
const DefaultKeep = 5

// Registry is a directory of versioned model artifacts, the one source of
// truth for models:
//
//	DIR/<target>/v000007.model   the artifact (models.Encode: format, gob, SHA-256)
//	DIR/<target>/v000007.json    its manifest: metrics, features, data range, creation time
//	DIR/<target>/CURRENT         the version that serves
//
// Files are written to a temporary name and renamed, so a reader never sees
// half a file. One process publishes at a time.
type Registry struct {
	Dir  string
	Keep int // versions kept per target; 0 means DefaultKeep
}

// Manifest describes a published version without decoding it.
type Manifest struct {
	Target       models.Target                 `json:"target"`
	Version      int                           `json:"version"`
	Format       int                           `json:"format"`
	CreatedAt    time.Time                     `json:"created_at"`
	DataFrom     time.Time                     `json:"data_from"`
	DataUntil    time.Time                     `json:"data_until"`
	HoldoutFrom  time.Time                     `json:"holdout_from"`
	Rows         int                           `json:"rows"`
	Selected     string                        `json:"selected"`
	Features     []string                      `json:"features"`
	Metrics      map[string]map[string]float64 `json:"metrics"`
	Current      bool                          `json:"current"`
	ArtifactFile string                        `json:"artifact_file"`
}

// ErrNoModel is returned when the registry holds no version of a target.
var ErrNoModel = errors.New("no published model")

var versionFile = regexp.MustCompile(`^v(\d{6,})\.model$`)

func (r Registry) dir(t models.Target) string { return filepath.Join(r.Dir, string(t)) }

// ArtifactPath is where version v of target t lives.
func (r Registry) ArtifactPath(t models.Target, v int) string {
	return filepath.Join(r.dir(t), fmt.Sprintf("v%06d.model", v))
}

func (r Registry) manifestPath(t models.Target, v int) string {
	return filepath.Join(r.dir(t), fmt.Sprintf("v%06d.json", v))
}

// Versions lists the published versions of t, oldest first.
func (r Registry) Versions(t models.Target) ([]int, error) {
	entries, err := os.ReadDir(r.dir(t))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	var vs []int
	for _, e := range entries {
		if m := versionFile.FindStringSubmatch(e.Name()); m != nil {
			if v, err := strconv.Atoi(m[1]); err == nil {
				vs = append(vs, v)
			}
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// Current is the serving version of t; ErrNoModel when none.
func (r Registry) Current(t models.Target) (int, error) {
	path := filepath.Join(r.dir(t), "CURRENT")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("registry %s: %w for %s", r.Dir, ErrNoModel, t)
	}
	if err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("registry: %s: %q is not a version", path, strings.TrimSpace(string(data)))
	}
	return v, nil
}

// Load decodes version v of t (models.Decode checks format and checksum).
func (r Registry) Load(t models.Target, v int) (*models.Artifact, error) {
	path := r.ArtifactPath(t, v)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer f.Close()
	a, err := models.Decode(f, path)
	if err != nil {
		return nil, err
	}
	if a.Target != t || a.Version != v {
		return nil, fmt.Errorf("%s: %w: holds %s version %d", path, models.ErrCorruptArtifact, a.Target, a.Version)
	}
	return a, nil
}

// LoadCurrent decodes the serving version of t.
func (r Registry) LoadCurrent(t models.Target) (*models.Artifact, error) {
	v, err := r.Current(t)
	if err != nil {
		return nil, err
	}
	return r.Load(t, v)
}

// Publish stores a as the next version of its target, makes it current
// and drops the oldest versions beyond Keep. It sets a.Version.
func (r Registry) Publish(a *models.Artifact) (int, error) {
	vs, err := r.Versions(a.Target)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(r.dir(a.Target), 0o755); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	a.Version = 1
	if len(vs) > 0 {
		a.Version = vs[len(vs)-1] + 1
	}
	var buf bytes.Buffer
	if err := models.Encode(&buf, a); err != nil {
		return 0, err
	}
	if err := writeFileAtomic(r.ArtifactPath(a.Target, a.Version), buf.Bytes()); err != nil {
		return 0, err
	}
	m, err := json.MarshalIndent(manifestOf(a), "", "  ")
	if err != nil {
		return 0, fmt.Errorf("registry: manifest: %w", err)
	}
	if err := writeFileAtomic(r.manifestPath(a.Target, a.Version), append(m, '\n')); err != nil {
		return 0, err
	}
	if err := r.setCurrent(a.Target, a.Version); err != nil {
		return 0, err
	}
	return a.Version, r.prune(a.Target, a.Version)
}

func manifestOf(a *models.Artifact) Manifest {
	return Manifest{
		Target: a.Target, Version: a.Version, Format: a.Format, CreatedAt: a.CreatedAt,
		DataFrom: a.DataFrom, DataUntil: a.DataUntil, HoldoutFrom: a.HoldoutFrom, Rows: a.Rows,
		Selected: a.Selected, Features: a.FeatureNames, Metrics: a.Metrics,
	}
}

// List returns the manifests of t's versions, newest first.
func (r Registry) List(t models.Target) ([]Manifest, error) {
	vs, err := r.Versions(t)
	if err != nil {
		return nil, err
	}
	cur, _ := r.Current(t)
	var out []Manifest
	for i := len(vs) - 1; i >= 0; i-- {
		path := r.manifestPath(t, vs[i])
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		var m Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("registry: %s: %w", path, err)
		}
		m.Current = vs[i] == cur
		m.ArtifactFile = r.ArtifactPath(t, vs[i])
		out = append(out, m)
	}
	return out, nil
}

// Rollback makes version to of t current; with to = 0, the newest version
// older than the current one. The artifact must load. It returns the
// version now current.
func (r Registry) Rollback(t models.Target, to int) (int, error) {
	cur, err := r.Current(t)
	if err != nil {
		return 0, err
	}
	if to == 0 {
		vs, err := r.Versions(t)
		if err != nil {
			return 0, err
		}
		for _, v := range vs {
			if v < cur {
				to = v
			}
		}
		if to == 0 {
			return 0, fmt.Errorf("registry: rollback: no version of %s older than %d", t, cur)
		}
	}
	if err := r.check(t, to); err != nil {
		return 0, fmt.Errorf("registry: rollback to %d: %w", to, err)
	}
	return to, r.setCurrent(t, to)
}

// check loads version v of t to see that it can serve.
func (r Registry) check(t models.Target, v int) error {
	if t == idle.Target {
		_, err := r.LoadIdle(v)
		return err
	}
	if t == models.TargetPeak {
		_, err := r.LoadPeak(v)
		return err
	}
	_, err := r.Load(t, v)
	return err
}

func (r Registry) setCurrent(t models.Target, v int) error {
	return writeFileAtomic(filepath.Join(r.dir(t), "CURRENT"), []byte(strconv.Itoa(v)+"\n"))
}

func (r Registry) prune(t models.Target, current int) error {
	keep := r.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	vs, err := r.Versions(t)
	if err != nil {
		return err
	}
	var errs []error
	for i := 0; i < len(vs)-keep; i++ {
		if vs[i] == current {
			continue
		}
		for _, p := range []string{r.ArtifactPath(t, vs[i]), r.manifestPath(t, vs[i])} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func writeFileAtomic(path string, data []byte) error {
	err := fsutil.WriteAtomic(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}
