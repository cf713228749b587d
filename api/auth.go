package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/prescient-sched/prescient/internal/bearer"
)

type principalKey struct{}

// principalCtxKey is where the gin context keeps the Principal.
const principalCtxKey = "prescient.principal"

// PrincipalFrom returns the principal a request acts for; handlers mounted
// behind the API's auth (the agent hub) read it from the request's context.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// authorize checks the bearer token against the route's access class: no
// valid token is 401 with WWW-Authenticate, a role the route does not take
// is 403.
func (s *Server) authorize(a access) gin.HandlerFunc {
	return func(c *gin.Context) {
		if a == accessOpen || a == accessMetrics && !s.cfg.MetricsNeedToken {
			c.Next()
			return
		}
		// No body is read before the token is checked; after a refusal
		// the connection closes at once rather than wait for the body to
		// drain (the server would read it to reuse the connection).
		refuse := func(status int, code, msg string) {
			if c.Request.ContentLength != 0 {
				c.Header("Connection", "close")
				_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
			}
			writeError(c, status, code, msg)
		}
		token, given := bearer.Token(c.Request)
		if !given {
			c.Header("WWW-Authenticate", `Bearer realm="prescient"`)
			refuse(http.StatusUnauthorized, "unauthorized", "missing bearer token: send the header Authorization: Bearer <token>")
			return
		}
		p, ok := s.tokens.Load().Lookup(token)
		if !ok {
			c.Header("WWW-Authenticate", `Bearer realm="prescient", error="invalid_token"`)
			refuse(http.StatusUnauthorized, "unauthorized", "the bearer token is not valid")
			return
		}
		if want := a.roles(); !slices.Contains(want, p.Role) {
			refuse(http.StatusForbidden, "forbidden",
				"role "+string(p.Role)+" may not "+c.Request.Method+" "+c.FullPath()+" (it takes "+joinRoles(want)+")")
			return
		}
		c.Set(principalCtxKey, p)
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), principalKey{}, p))
		c.Next()
	}
}

func joinRoles(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// principal is the request's principal; routes that reach a handler that
// calls it have passed authorize.
func principal(c *gin.Context) Principal {
	p, _ := c.Get(principalCtxKey)
	pr, _ := p.(Principal)
	return pr
}
