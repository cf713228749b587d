package api

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// boundBody gives a request that carries a body until timeout after its
// headers to send all of it: past that, reading it fails (the handler
// answers 400) and the connection closes. The bound is lifted once the
// body is read, or at once for a request without one, so that a long poll
// is not cut off by it. http.Server's ReadTimeout cannot do this: it would
// end long polls too.
func boundBody(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			next.ServeHTTP(w, r) // a writer without deadlines (a test's recorder)
			return
		}
		r.Body = &liftingBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

// liftingBody lifts the read deadline once the body is read to its end.
type liftingBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *liftingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
