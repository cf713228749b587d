package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run executes the command line and returns what it printed.
func run(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prescient.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSettingsPrecedence(t *testing.T) {
	jsonFile := writeConfig(t, "output: json\n")
	tableFile := writeConfig(t, "output: table\n")
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantJSON bool
	}{
		{name: "built-in default is a table", args: []string{"version"}},
		{name: "config file sets a value", args: []string{"version", "--config", jsonFile}, wantJSON: true},
		{name: "config file named by PRESCIENT_CONFIG", env: map[string]string{"PRESCIENT_CONFIG": jsonFile}, args: []string{"version"}, wantJSON: true},
		{name: "environment beats the config file", env: map[string]string{"PRESCIENT_OUTPUT": "json"}, args: []string{"version", "--config", tableFile}, wantJSON: true},
		{name: "flag beats the environment", env: map[string]string{"PRESCIENT_OUTPUT": "json"}, args: []string{"version", "--output", "table"}},
		{name: "flag beats the config file", args: []string{"version", "--config", jsonFile, "-o", "table"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			out, err := run(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if isJSON := strings.HasPrefix(out, "{"); isJSON != tt.wantJSON {
				t.Fatalf("output JSON = %v, want %v:\n%s", isJSON, tt.wantJSON, out)
			}
		})
	}
}

func TestConfigFileSectionsFollowTheCommandPath(t *testing.T) {
	cfg := writeConfig(t, "output: table\nversion:\n  output: json\n")
	out, err := run(t, "version", "--config", cfg)
	if err != nil || !strings.Contains(out, `"go_version"`) {
		t.Fatalf("the version section should override the top level: %v\n%s", err, out)
	}
}

func TestBadSettingsSayWhere(t *testing.T) {
	tests := []struct {
		name string
		body string
		env  map[string]string
		want []string
	}{
		{name: "unknown top-level key", body: "log_level: info\nlog_levle: debug\n", want: []string{"prescient.yaml:2", "log_levle"}},
		{name: "unknown key in a command's section", body: "serve:\n  adress: x\n", want: []string{"prescient.yaml:2", "adress", "serve"}},
		{name: "value that does not parse", body: "serve:\n  shutdown_timeout: soon\n", want: []string{"prescient.yaml:2", "shutdown_timeout"}},
		{name: "a mapping where one value belongs", body: "serve:\n  addr: {host: x}\n", want: []string{"prescient.yaml:2", "addr", "not a mapping"}},
		{name: "a list of mappings", body: "serve:\n  addr: [{host: x}]\n", want: []string{"prescient.yaml:2", "plain values"}},
		{name: "bad environment value", env: map[string]string{"PRESCIENT_SHUTDOWN_TIMEOUT": "soon"}, want: []string{"PRESCIENT_SHUTDOWN_TIMEOUT"}},
		{name: "invalid log level", env: map[string]string{"PRESCIENT_LOG_LEVEL": "loud"}, want: []string{"--log-level", "loud"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--addr", "256.0.0.1:1"}
			if tt.body != "" {
				args = append(args, "--config", writeConfig(t, tt.body))
			}
			_, err := run(t, args...)
			if err == nil {
				t.Fatal("bad settings were accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzConfigFile(f *testing.F) {
	f.Add("log_level: debug\nserve:\n  addr: 127.0.0.1:9000\n")
	f.Add("datasets:\n  inspect:\n    lenient: true\n    max_errors: [1, 2]\n")
	f.Add("- a\n- b\n")
	f.Add("serve: 3\nversion: {output: json}\n")
	root := newRootCmd()
	serve := subcommand(root, "serve")
	f.Fuzz(func(t *testing.T, body string) {
		settings, err := parseConfig([]byte(body), "fuzz.yaml", serve)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for name := range settings {
			if !hasFlag(serve, name) {
				t.Fatalf("accepted key %q that is no flag of serve", name)
			}
		}
	})
}

func TestConfigFileMappingSetsKeyValueFlags(t *testing.T) {
	cfg := writeConfig(t, "datasets:\n  generate:\n    jobs: 50\n    tier_mix: {production: 1, batch: 1}\n")
	out := filepath.Join(t.TempDir(), "h.jsonl")
	if _, err := run(t, "datasets", "generate", "--config", cfg, "--out", out, "--log-level", "warn"); err != nil {
		t.Fatal(err)
	}
	report, err := run(t, "datasets", "inspect", "prescient:"+out, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, `"jobs": 50`) || strings.Contains(report, `"standard"`) || strings.Contains(report, `"opportunistic"`) {
		t.Fatalf("tier_mix from the config file was not applied:\n%s", report)
	}
}
