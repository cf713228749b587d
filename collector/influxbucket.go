package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// BucketError says why a bucket could not be found or created, in words an
// operator can act on.
type BucketError struct {
	URL    string
	Bucket string
	Status int // HTTP status, 0 when the server was not reached
	Msg    string
	Err    error
}

func (e *BucketError) Error() string {
	s := fmt.Sprintf("influxdb %s: bucket %q: %s", e.URL, e.Bucket, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *BucketError) Unwrap() error { return e.Err }

// ErrBucketForbidden is wrapped by the BucketError returned when the server
// does not let this token create a missing bucket.
var ErrBucketForbidden = errors.New("not allowed to create the bucket")

// SplitBucket reads an InfluxDB 1.8 bucket name "db/rp" (or "db", meaning the
// database's default retention policy, returned as "").
func SplitBucket(bucket string) (db, rp string, err error) {
	db, rp, _ = strings.Cut(bucket, "/")
	if db == "" || strings.Contains(rp, "/") {
		return "", "", fmt.Errorf("bucket %q: want DATABASE or DATABASE/RETENTION_POLICY", bucket)
	}
	return db, rp, nil
}

// EnsureBucket makes sure the bucket "db/rp" exists on an InfluxDB 1.8 server,
// where a bucket exists only after CREATE DATABASE (and, for a named
// retention policy other than the default, CREATE RETENTION POLICY) through
// /query. It creates what is missing when the server allows and reports
// whether it did. When the token may not create it, the error wraps
// ErrBucketForbidden and says what to run instead.
func EnsureBucket(ctx context.Context, hc *http.Client, serverURL, token, bucket string) (created bool, err error) {
	db, rp, err := SplitBucket(bucket)
	if err != nil {
		return false, err
	}
	q := influxQL{hc: hc, url: strings.TrimRight(serverURL, "/"), token: token, bucket: bucket}

	dbs, err := q.column(ctx, "SHOW DATABASES", "")
	if err != nil {
		return false, err
	}
	if !slices.Contains(dbs, db) {
		if err := q.exec(ctx, fmt.Sprintf("CREATE DATABASE %s", quoteIdent(db))); err != nil {
			return false, err
		}
		created = true
	}
	if rp == "" {
		return created, nil
	}
	rps, err := q.column(ctx, "SHOW RETENTION POLICIES ON "+quoteIdent(db), db)
	if err != nil {
		return created, err
	}
	if !slices.Contains(rps, rp) {
		stmt := fmt.Sprintf("CREATE RETENTION POLICY %s ON %s DURATION INF REPLICATION 1", quoteIdent(rp), quoteIdent(db))
		if err := q.exec(ctx, stmt); err != nil {
			return created, err
		}
		created = true
	}
	return created, nil
}

// influxQL runs InfluxQL statements through /query.
type influxQL struct {
	hc                 *http.Client
	url, token, bucket string
}

type queryResponse struct {
	Error   string `json:"error"`
	Results []struct {
		Error  string `json:"error"`
		Series []struct {
			Values [][]any `json:"values"`
		} `json:"series"`
	} `json:"results"`
}

// column runs a SHOW statement and returns the first column of its rows.
func (q influxQL) column(ctx context.Context, stmt, db string) ([]string, error) {
	resp, err := q.do(ctx, http.MethodGet, stmt, db)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range resp.Results {
		for _, s := range r.Series {
			for _, v := range s.Values {
				if len(v) > 0 {
					if name, ok := v[0].(string); ok {
						names = append(names, name)
					}
				}
			}
		}
	}
	return names, nil
}

func (q influxQL) exec(ctx context.Context, stmt string) error {
	_, err := q.do(ctx, http.MethodPost, stmt, "")
	return err
}

func (q influxQL) do(ctx context.Context, method, stmt, db string) (*queryResponse, error) {
	form := url.Values{"q": {stmt}}
	if db != "" {
		form.Set("db", db)
	}
	var body io.Reader
	endpoint := q.url + "/query"
	if method == http.MethodGet {
		endpoint += "?" + form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Msg: "bad server URL", Err: err}
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if q.token != "" {
		req.Header.Set("Authorization", "Token "+q.token)
	}
	res, err := q.hc.Do(req)
	if err != nil {
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Msg: "server unreachable", Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode, Msg: "reading the reply", Err: err}
	}
	var qr queryResponse
	jsonErr := json.Unmarshal(raw, &qr)
	msg := qr.Error
	for _, r := range qr.Results {
		if msg == "" {
			msg = r.Error
		}
	}
	switch {
	// 401: the credentials are wrong. 403 (and a server with authentication
	// on but no users yet, which answers 403 "create admin user first"): they
	// are right but may not create the bucket.
	case res.StatusCode == http.StatusUnauthorized:
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode,
			Msg: fmt.Sprintf("%s: the server does not accept these credentials (%s)", stmt, strings.TrimSpace(firstNonEmpty(msg, string(raw)))),
			Err: ErrUnauthorized}
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden ||
		strings.Contains(msg, "authoriz") || strings.Contains(msg, "authenticat"):
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode,
			Msg: fmt.Sprintf("%s refused (%s): create the database yourself (CREATE DATABASE and, for a named retention policy, CREATE RETENTION POLICY) or use a token with admin rights", stmt, strings.TrimSpace(firstNonEmpty(msg, string(raw)))),
			Err: ErrBucketForbidden}
	case res.StatusCode/100 != 2:
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode,
			Msg: fmt.Sprintf("%s failed with HTTP %d: %s", stmt, res.StatusCode, strings.TrimSpace(firstNonEmpty(msg, string(raw))))}
	case jsonErr != nil:
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode, Msg: "the reply is not InfluxDB 1.x JSON (is this an InfluxDB 1.8 server?)", Err: jsonErr}
	case msg != "":
		return nil, &BucketError{URL: q.url, Bucket: q.bucket, Status: res.StatusCode, Msg: fmt.Sprintf("%s: %s", stmt, msg)}
	}
	return &qr, nil
}

// quoteIdent quotes an InfluxQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
