// Package bearer reads the bearer token of an HTTP request, for the API's
// authorization and the Slurm advisor's alike.
package bearer

import (
	"net/http"
	"strings"
)

// Token returns the token of an "Authorization: Bearer" header; false when
// there is none (no header, another scheme, or an empty token).
func Token(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
