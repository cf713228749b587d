package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/service"
)

// Client calls the /v1 API with a bearer token: the user CLI's
// (prescient jobs, queue, whatif) way to the control plane.
type Client struct {
	// Server is the control plane's base URL, http://HOST:PORT.
	Server string
	Token  string
	// HTTP defaults to a client with a 30 s timeout.
	HTTP *http.Client
}

// Error is an API answer other than 2xx: its status and the error body's
// code and message.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// JobsPage is one page of GET /v1/jobs: Next, when set, continues it.
func (c *Client) JobsPage(ctx context.Context, q url.Values) (JobList, error) {
	var out JobList
	err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &out)
	return out, err
}

// Jobs lists every job the query selects, page by page (limit 1000).
func (c *Client) Jobs(ctx context.Context, q url.Values) ([]service.JobStatus, error) {
	q = cloneValues(q)
	q.Set("limit", fmt.Sprint(maxListLimit))
	var all []service.JobStatus
	for {
		page, err := c.JobsPage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all, nil
		}
		q.Set("after", string(page.Next))
	}
}

// Job is GET /v1/jobs/{id}.
func (c *Client) Job(ctx context.Context, id string) (service.JobStatus, error) {
	var out service.JobStatus
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &out)
	return out, err
}

// JobEvents is GET /v1/jobs/{id}/events.
func (c *Client) JobEvents(ctx context.Context, id string) (JobEventList, error) {
	var out JobEventList
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, &out)
	return out, err
}

// JobLog is GET /v1/jobs/{id}/log; attempt 0 is the newest, maxBytes 0
// the server's default.
func (c *Client) JobLog(ctx context.Context, id string, attempt, maxBytes int) (service.JobLog, error) {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if maxBytes > 0 {
		q.Set("bytes", strconv.Itoa(maxBytes))
	}
	path := "/v1/jobs/" + url.PathEscape(id) + "/log"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out service.JobLog
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Submit is POST /v1/jobs.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (service.JobStatus, error) {
	var out service.JobStatus
	err := c.do(ctx, http.MethodPost, "/v1/jobs", req, &out)
	return out, err
}

// Cancel is DELETE /v1/jobs/{id}.
func (c *Client) Cancel(ctx context.Context, id string) (service.JobStatus, error) {
	var out service.JobStatus
	err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, &out)
	return out, err
}

// WhatIf is POST /v1/whatif.
func (c *Client) WhatIf(ctx context.Context, req WhatIfRequest) (service.WhatIfResult, error) {
	var out service.WhatIfResult
	err := c.do(ctx, http.MethodPost, "/v1/whatif", req, &out)
	return out, err
}

// Tenants is GET /v1/tenants (admin).
func (c *Client) Tenants(ctx context.Context) (service.TenantsInfo, error) {
	var out service.TenantsInfo
	err := c.do(ctx, http.MethodGet, "/v1/tenants", nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	if c.Server == "" {
		return errors.New("no server: set --server (env PRESCIENT_SERVER)")
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			return &Error{Status: res.StatusCode, Code: http.StatusText(res.StatusCode), Message: strings.TrimSpace(string(b))}
		}
		return &Error{Status: res.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
