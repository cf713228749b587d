package webhook_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/webhook"
)

func TestSignMatchesRFC4231AndVerifyRejectsTampering(t *testing.T) {
	// RFC 4231, test case 2.
	got := webhook.Sign([]byte("Jefe"), []byte("what do ya want for nothing?"))
	if want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	body := []byte(`{"type":"started"}`)
	sig := webhook.Sign([]byte(secret), body)
	tests := []struct {
		name   string
		secret string
		body   string
		header string
		want   bool
	}{
		{"the signature", secret, string(body), sig, true},
		{"another body", secret, `{"type":"finished"}`, sig, false},
		{"another secret", "another-secret-entirely", string(body), sig, false},
		{"no prefix", secret, string(body), strings.TrimPrefix(sig, "sha256="), false},
		{"not hex", secret, string(body), "sha256=zz", false},
		{"empty", secret, string(body), "", false},
	}
	for _, tt := range tests {
		if got := webhook.Verify([]byte(tt.secret), []byte(tt.body), tt.header); got != tt.want {
			t.Errorf("%s: Verify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := webhook.ParseConfig([]byte(`webhooks:
  - name: tracker
    url: https://tracker.example.com/hooks/prescient
    secret: "a-long-random-shared-secret"
    events: [started, finished, failed]
    tenants: [ml]
    timeout_s: 2.5
  - {name: pipeline, url: "http://10.0.0.7:8080/x", secret: "another-long-secret-1"}
`), "hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Hooks) != 2 {
		t.Fatalf("%d hooks", len(cfg.Hooks))
	}
	h := cfg.Hooks[0]
	if h.Name != "tracker" || string(h.Secret) != "a-long-random-shared-secret" || len(h.Events) != 3 || h.Tenants[0] != "ml" || h.Timeout != 2500*time.Millisecond {
		t.Fatalf("hook %+v", h)
	}
}

func TestParseConfigErrorsNameFileLineAndField(t *testing.T) {
	ok := `url: "https://x.example/h", secret: "a-long-random-shared-secret"`
	tests := []struct {
		name, file string
		want       []string
	}{
		{"empty", ``, []string{"hooks.yaml", "empty"}},
		{"unknown top-level key", `hooks: []`, []string{"hooks.yaml:1", `"hooks"`}},
		{"not a list", `webhooks: {}`, []string{"hooks.yaml:1", "list"}},
		{"unknown field", "webhooks:\n  - {name: a, " + ok + ", retries: 3}", []string{"hooks.yaml:2", "webhooks[0].retries", "unknown field"}},
		{"no name", "webhooks:\n  - {" + ok + "}", []string{"webhooks[0].name", "empty"}},
		{"duplicate name", "webhooks:\n  - {name: a, " + ok + "}\n  - {name: a, " + ok + "}", []string{"webhooks[1].name", "webhooks[0]"}},
		{"bad scheme", "webhooks:\n  - {name: a, url: ftp://x/y, secret: a-long-random-shared-secret}", []string{"webhooks[0].url", "http or https"}},
		{"no host", "webhooks:\n  - {name: a, url: 'https:///y', secret: a-long-random-shared-secret}", []string{"webhooks[0].url", "no host"}},
		{"short secret", "webhooks:\n  - {name: a, url: https://x.example/h, secret: abc}", []string{"webhooks[0].secret", "at least 16"}},
		{"unknown event", "webhooks:\n  - {name: a, " + ok + ", events: [started, exploded]}", []string{"webhooks[0].events[1]", `"exploded"`}},
		{"events not a list", "webhooks:\n  - {name: a, " + ok + ", events: started}", []string{"webhooks[0].events", "want a list"}},
		{"bad timeout", "webhooks:\n  - {name: a, " + ok + ", timeout_s: -1}", []string{"webhooks[0].timeout_s", "(0, 300]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.ParseConfig([]byte(tt.file), "hooks.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"webhooks:\n  - {name: a, url: https://x.example/h, secret: a-long-random-shared-secret}\n",
		"webhooks:\n  - {name: a, url: https://x.example/h, secret: a-long-random-shared-secret, events: [started], tenants: [ml], timeout_s: 3}\n",
		"webhooks: []", "webhooks:", "", "- x", "webhooks: [{name: [1]}]", "webhooks: [{timeout_s: 1e999}]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cfg, err := webhook.ParseConfig([]byte(data), "hooks.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "hooks.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig returned a config that does not validate: %v", err)
		}
	})
}
