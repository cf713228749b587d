package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api/dashboard"
	"github.com/prescient-sched/prescient/internal/browsertest"
)

func TestNetworkErrorIsShown(t *testing.T) {
	srv := httptest.NewServer(dashboard.Handler())
	b := browsertest.Start(t)
	browsertest.Open(b, srv.URL)
	srv.CloseClientConnections()
	srv.Close()
	msg := browsertest.LoginRefused(b, "some-token-that-is-long-enough")
	t.Logf("the login form says: %s", msg)
	if !strings.Contains(msg, "network error") {
		t.Fatalf("login with the API down shows %q; want it to say network error", msg)
	}
}
