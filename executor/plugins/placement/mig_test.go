package placement

import (
	"testing"
)

func TestMIGProfileFor(t *testing.T) {
	tests := []struct {
		model string
		milli int
		mem   int64
		want  string
	}{
		{"A100-SXM4-40GB", 100, 0, "1g.5gb"},
		{"A100-SXM4-40GB", 150, 0, "2g.10gb"}, // 7·150/1000 = 1.05: two compute slices
		{"A100-SXM4-40GB", 100, 8 << 30, "1g.10gb"},
		{"A100-SXM4-80GB", 400, 0, "3g.40gb"},
		{"H100-SXM5-80GB", 500, 0, "4g.40gb"},
		{"H100-SXM5-80GB", 600, 50 << 30, "7g.80gb"},
	}
	for _, tt := range tests {
		p, ok := MIGProfileFor(tt.model, 0, tt.milli, tt.mem)
		if !ok || p.Name != tt.want {
			t.Errorf("%s, %d milli, %d bytes: %q %v, want %s", tt.model, tt.milli, tt.mem, p.Name, ok, tt.want)
		}
	}
	if _, ok := MIGProfileFor("V100", 0, 300, 0); ok {
		t.Error("a V100 has MIG profiles")
	}
	if _, ok := MIGProfileFor("A100-SXM4-40GB", 0, 300, 41<<30); ok {
		t.Error("a footprint larger than the GPU got a profile")
	}
}

func TestMIGGeometry(t *testing.T) {
	prof := func(name string) MIGProfile {
		for _, p := range MIGProfiles("A100-SXM4-40GB", 0) {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no profile %s", name)
		return MIGProfile{}
	}
	tests := []struct {
		name      string
		existing  []int
		profile   string
		wantOK    bool
		wantStart int
	}{
		{"a 3g beside a 3g goes to slice 4", []int{4}, "3g.20gb", true, 4},
		{"a 4g may not go beside a 3g or 4g, which may sit at slice 0", []int{4}, "4g.20gb", false, 0},
		{"nothing fits past 8 slices", []int{4, 2}, "3g.20gb", false, 0},
		{"a 1g.5gb never starts at slice 7", []int{1, 1, 1, 1, 1, 1, 1}, "1g.5gb", false, 0},
		{"a fourth 2g has no start beside three", []int{2, 2, 2}, "2g.10gb", false, 0},
		{"a 1g.10gb may take slice 6 beside three 2g", []int{2, 2, 2}, "1g.10gb", true, 6},
		{"a 7g needs an empty GPU", []int{1}, "7g.40gb", false, 0},
		{"an instance size no profile has blocks the GPU", []int{3}, "1g.5gb", false, 0},
	}
	for _, tt := range tests {
		start, ok := migPlace(tt.existing, prof(tt.profile))
		if ok != tt.wantOK || ok && start != tt.wantStart {
			t.Errorf("%s: start %d, %v; want %d, %v", tt.name, start, ok, tt.wantStart, tt.wantOK)
		}
	}
}
