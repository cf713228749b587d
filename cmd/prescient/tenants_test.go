package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
)

// A live serve with a tenants file: three tenants in one cohort share 80
// GPUs 32/32/16 (40/40/20%). a borrows the idle GPUs up to its borrowing
// limit; b's jobs, within its nominal quota, get their GPUs back within a
// planning cycle plus the victims' grace; no tenant holds more than its
// quota plus its borrowing limit at any point the test looks. An edit of
// the file applies without a restart; a broken edit keeps the last good.
func TestServeSharesQuotaInACohortAndReloadsTheTenantsFile(t *testing.T) {
	dir := t.TempDir()
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	cohort := "tenants:\n" +
		"  - {name: a, cohort: lab, quota: [{gpus: 32, borrowing_limit: 40}]}\n" +
		"  - {name: b, cohort: lab, quota: [{gpus: 32}]}\n" +
		"  - {name: c, cohort: lab, quota: [{gpus: 16}]}\n"
	if err := os.WriteFile(tenantsFile, []byte(cohort), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n"+
		"  - {name: admin, token: admin-token-0123456789, tenant: ops, role: admin}\n"+
		"  - {name: a, token: a-token-0123456789, tenant: a, role: submitter}\n"+
		"  - {name: b, token: b-token-0123456789, tenant: b, role: submitter}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	url := startServe(t, "--db", filepath.Join(dir, "p.db"), "--tokens", tokens, "--backend", "sim",
		"--fleet", "uniform:10x8:A100-SXM4-80GB", "--mode", "autopilot", "--tick", "200ms", "--grace", grace.String(),
		"--tenants", tenantsFile, "--tenants-reload", "200ms")
	admin := &api.Client{Server: url, Token: "admin-token-0123456789"}
	submit := func(tenant, token string, n int) {
		t.Helper()
		c := &api.Client{Server: url, Token: token}
		for i := range n {
			req := api.SubmitRequest{JobSpecRequest: api.JobSpecRequest{Name: fmt.Sprintf("%s%d", tenant, i), GPUs: 4, Checkpointable: true,
				Labels: map[string]string{"duration_s": "3600"}}}
			if _, err := c.Submit(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
	}
	// held polls the tenants' GPUs until ok says so, checking the caps at
	// every look.
	held := func(what string, within time.Duration, ok func(map[string]int) bool) map[string]int {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			info, err := admin.Tenants(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, ti := range info.Tenants {
				for _, q := range ti.Quotas {
					got[ti.Name] += q.HeldGPUs
				}
			}
			if got["a"] > 72 || got["b"] > 32 || got["a"]+got["b"]+got["c"] > 80 {
				t.Fatalf("held %v: above a quota plus its borrowing limit, or the fleet", got)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: held %v after %s", what, got, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	submit("a", "a-token-0123456789", 30)
	held("a borrows the idle GPUs", 20*time.Second, func(h map[string]int) bool { return h["a"] == 72 })
	came := time.Now()
	submit("b", "b-token-0123456789", 8)
	held("b takes its quota back", 30*time.Second, func(h map[string]int) bool { return h["b"] == 32 })
	// One cycle (200 ms), the victims' grace (the sim's checkpoints land
	// at once, so they stop sooner), and time for the submissions and
	// the polls on a loaded machine.
	if took := time.Since(came); took > grace+5*time.Second {
		t.Errorf("b's 8 jobs all ran %s after they came, want within a cycle plus the grace (%s)", took, grace)
	}
	st, err := admin.Tenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Source != "file" || st.File == nil || st.File.Path != tenantsFile || st.File.LastError != "" {
		t.Fatalf("tenants source %q, file %+v", st.Source, st.File)
	}
	// The admin's command shows the same; a submitter may not ask.
	out, err := cli(t, url, "admin-token-0123456789", nil, "tenants")
	if err != nil || !strings.Contains(out, "tenants file "+tenantsFile) || !regexp.MustCompile(`(?m)^b\s+lab\s+1\s+\S+\s+8\s+any\s+any\s+32/32\s+0\s+no cap\s+all\s*$`).MatchString(out) {
		t.Errorf("prescient tenants: %v\n%s", err, out)
	}
	if _, err := cli(t, url, "a-token-0123456789", nil, "tenants"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("prescient tenants as a submitter: %v, want 403", err)
	}

	// An edit applies: b may now use the batch tier only.
	if err := os.WriteFile(tenantsFile, []byte(strings.Replace(cohort, "{name: b, cohort: lab,", "{name: b, cohort: lab, tiers: [batch],", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bc := &api.Client{Server: url, Token: "b-token-0123456789"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := bc.Submit(context.Background(), api.SubmitRequest{JobSpecRequest: api.JobSpecRequest{GPUs: 1, Tier: "standard"}})
		if err != nil {
			if !strings.Contains(err.Error(), "tier") {
				t.Fatalf("refused for %v, want the tier named", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the edited tenants file never applied")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A broken edit: reported, the last good stays.
	if err := os.WriteFile(tenantsFile, []byte(cohort+"  - {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, err := admin.Tenants(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.File.LastError != "" {
			if !strings.Contains(st.File.LastError, "tenants.yaml:5") || len(st.Tenants) != 3 {
				t.Errorf("after a broken edit: error %q, %d tenants", st.File.LastError, len(st.Tenants))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broken edit was never reported")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
