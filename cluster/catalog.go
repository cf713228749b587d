package cluster

import "strings"

// GPUModelSpec is what the catalog knows about a GPU model: the defaults a
// fleet file or trace gets for the fields it leaves out.
type GPUModelSpec struct {
	Model       string
	Vendor      string
	MemoryBytes int64
	PowerLimitW float64 // board power limit (TDP)
	MinPowerW   float64 // lowest settable power limit
	MIGCapable  bool
}

const gib = int64(1) << 30

// catalog holds vendor data sheet figures. Names follow what the traces and
// NVML report; lookups ignore case and the "NVIDIA"/"Tesla" prefixes.
var catalog = []GPUModelSpec{
	{Model: "K80", Vendor: "nvidia", MemoryBytes: 12 * gib, PowerLimitW: 149, MinPowerW: 100},
	{Model: "P100", Vendor: "nvidia", MemoryBytes: 16 * gib, PowerLimitW: 250, MinPowerW: 125},
	{Model: "P100-12GB", Vendor: "nvidia", MemoryBytes: 12 * gib, PowerLimitW: 250, MinPowerW: 125},
	{Model: "P40", Vendor: "nvidia", MemoryBytes: 24 * gib, PowerLimitW: 250, MinPowerW: 125},
	{Model: "V100", Vendor: "nvidia", MemoryBytes: 16 * gib, PowerLimitW: 300, MinPowerW: 150},
	{Model: "V100M16", Vendor: "nvidia", MemoryBytes: 16 * gib, PowerLimitW: 300, MinPowerW: 150},
	{Model: "V100M32", Vendor: "nvidia", MemoryBytes: 32 * gib, PowerLimitW: 300, MinPowerW: 150},
	{Model: "T4", Vendor: "nvidia", MemoryBytes: 16 * gib, PowerLimitW: 70, MinPowerW: 60},
	{Model: "RTX6000", Vendor: "nvidia", MemoryBytes: 24 * gib, PowerLimitW: 260, MinPowerW: 125},
	{Model: "A10", Vendor: "nvidia", MemoryBytes: 24 * gib, PowerLimitW: 150, MinPowerW: 100},
	{Model: "A40", Vendor: "nvidia", MemoryBytes: 48 * gib, PowerLimitW: 300, MinPowerW: 100},
	{Model: "A100-SXM4-40GB", Vendor: "nvidia", MemoryBytes: 40 * gib, PowerLimitW: 400, MinPowerW: 100, MIGCapable: true},
	{Model: "A100-SXM4-80GB", Vendor: "nvidia", MemoryBytes: 80 * gib, PowerLimitW: 400, MinPowerW: 100, MIGCapable: true},
	{Model: "H100-SXM5-80GB", Vendor: "nvidia", MemoryBytes: 80 * gib, PowerLimitW: 700, MinPowerW: 200, MIGCapable: true},
	{Model: "H200", Vendor: "nvidia", MemoryBytes: 141 * gib, PowerLimitW: 700, MinPowerW: 200, MIGCapable: true},
}

// LookupGPUModel returns the catalog entry for a model name. Unknown models
// (such as the anonymised "G2" and "G3" of the Alibaba openb trace) are not
// there: their memory and power stay unknown (zero) unless the fleet says.
func LookupGPUModel(model string) (GPUModelSpec, bool) {
	key := normalizeModel(model)
	for _, s := range catalog {
		if normalizeModel(s.Model) == key {
			return s, true
		}
	}
	return GPUModelSpec{}, false
}

func normalizeModel(m string) string {
	m = strings.ToUpper(strings.TrimSpace(m))
	for _, p := range []string{"NVIDIA ", "TESLA "} {
		m = strings.TrimPrefix(m, p)
	}
	return strings.ReplaceAll(m, " ", "-")
}

// NewGPU returns GPU index of the given model with the catalog's defaults.
func NewGPU(index int, model string) GPU {
	g := GPU{Index: index, Model: model}
	if s, ok := LookupGPUModel(model); ok {
		g.Vendor = s.Vendor
		g.MemoryBytes = s.MemoryBytes
		g.PowerLimitW = s.PowerLimitW
		g.MinPowerLimitW = s.MinPowerW
		g.MaxPowerLimitW = s.PowerLimitW
		g.MIGCapable = s.MIGCapable
	}
	return g
}

// MIGInstanceModel is the model name of a MIG instance of a profile that
// a fleet has already partitioned ("MIG-1g.10gb" for the profile 1g.10gb),
// as Kubernetes offers them (the device plugin's nvidia.com/mig-1g.10gb):
// each instance is then a GPU of that model on its own. Profile names say
// the instance's compute and memory, so instances of one name are alike
// whatever the product. Only jobs that name the model run on such GPUs.
func MIGInstanceModel(profile string) string { return migInstancePrefix + profile }

// IsMIGInstanceModel reports whether model names a MIG instance.
func IsMIGInstanceModel(model string) bool { return strings.HasPrefix(model, migInstancePrefix) }

const migInstancePrefix = "MIG-"
