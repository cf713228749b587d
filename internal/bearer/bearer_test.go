package bearer

import (
	"net/http"
	"strings"
	"testing"
)

func request(header string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	return r
}

func TestToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":     "abc",
		"bearer  abc ":   "abc",
		"BEARER abc def": "abc def",
		"":               "",
		"Bearer":         "",
		"Bearer    ":     "",
		"Basic dXNlcjpw": "",
		"Bearerabc":      "",
		"Token abc":      "",
	} {
		got, ok := Token(request(header))
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q, %v; want %q", header, got, ok, want)
		}
	}
}

// FuzzToken: any header gives either no token or a non-empty, trimmed one
// that the header carries after a Bearer scheme.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x ", "Basic y", "", "Bearer"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := request("")
		r.Header["Authorization"] = []string{header}
		token, ok := Token(r)
		switch {
		case !ok && token != "":
			t.Fatalf("%q: token %q without ok", header, token)
		case ok && (token == "" || token != strings.TrimSpace(token) || !strings.Contains(header, token) ||
			!strings.EqualFold(header[:len("Bearer")], "Bearer")):
			t.Fatalf("%q: token %q", header, token)
		}
	})
}
