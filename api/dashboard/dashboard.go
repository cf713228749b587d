package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page only its own scripts, styles and API:
// no inline script, nothing from elsewhere, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the dashboard: the page at / and its assets beside it
// (/dashboard.js and the modules it imports, /charts.js, /dashboard.css).
// Paths it does not know get
// 404; it answers GET and HEAD only. The page calls the API on the same
// origin, so the API server mounts this handler at / next to /v1.
func Handler() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		// The embedded tree is fixed at build time; a missing folder is a
		// build defect, not a runtime condition.
		panic("dashboard: embedded assets missing: " + err.Error())
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, r.Method+" "+r.URL.Path+": the dashboard takes GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || name == "index.html" {
			name = "index.html"
		} else if _, err := fs.Stat(root, name); err != nil || strings.HasPrefix(name, ".") {
			http.Error(w, "no dashboard page "+r.URL.Path, http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The assets change with the binary; a browser must not keep an old page beside a new API.
		h.Set("Cache-Control", "no-cache")
		if name == "index.html" {
			// ServeFileFS redirects /index.html to /, the page's one address.
			http.ServeFileFS(w, r, root, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
}
