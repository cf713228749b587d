package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// REST is a Client that speaks to slurmrestd with JSON Web Tokens
// (AuthAltTypes=auth/jwt; slurmrestd -a rest_auth/jwt). It reads and
// writes what slurmrestd's data parser version allows, and hands the
// rest to Commands: slurmrestd publishes no priority settings, and
// 22.05's v0.0.38 sets no AdminComment and powers no node.
type REST struct {
	// URL is slurmrestd's address: http://host:6820.
	URL string
	// User is the name the token was issued for (X-SLURM-USER-NAME);
	// empty: the token's own (a token from scontrol token carries it).
	User string
	// Token gives the token for each request, so that a renewed one
	// (scontrol token lifespan=...) is used without a restart.
	Token func() (string, error)
	// Version is the data parser version to speak (v0.0.38, v0.0.40 to
	// v0.0.43); empty: the newest the server answers, asked once.
	Version string
	// Commands does what slurmrestd cannot; nil: those are errors
	// wrapping errors.ErrUnsupported.
	Commands Client
	// HTTP is the client requests go through; nil: http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each request (default 30 s).
	Timeout time.Duration

	mu  sync.Mutex
	ver *restVersion
}

var _ Client = (*REST)(nil)

// restVersion is what differs between the data parser versions REST
// speaks.
type restVersion struct {
	name string
	// nested: numbers that may be unset or infinite are written as
	// {"set", "infinite", "number"} (v0.0.39 on).
	nested bool
	// comments: job updates take admin_comment; nodes: POST
	// /slurm/VER/node/NAME changes a node's state (v0.0.39 on).
	comments, nodes bool
}

// restVersions are the versions REST speaks, newest first: v0.0.38, the
// newest of Slurm 22.05 (tested against it), and v0.0.40 to v0.0.43 of
// 23.11 on (tested with responses of their published schemas).
// v0.0.39, short-lived and deprecated, is left out.
var restVersions = []restVersion{
	{name: "v0.0.43", nested: true, comments: true, nodes: true},
	{name: "v0.0.42", nested: true, comments: true, nodes: true},
	{name: "v0.0.41", nested: true, comments: true, nodes: true},
	{name: "v0.0.40", nested: true, comments: true, nodes: true},
	{name: "v0.0.38"},
}

// TokenFile gives the token in a file (its first line; a SLURM_JWT=
// prefix, as scontrol token writes it, is dropped), read again for every
// request.
func TokenFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("slurmrestd token: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		tok := strings.TrimPrefix(strings.TrimSpace(line), "SLURM_JWT=")
		if tok == "" {
			return "", fmt.Errorf("slurmrestd token: %s is empty", path)
		}
		return tok, nil
	}
}

// version is the version to speak: Version, or the newest one the server
// answers a ping in.
func (c *REST) version(ctx context.Context) (*restVersion, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ver != nil {
		return c.ver, nil
	}
	if c.Version != "" {
		for i := range restVersions {
			if restVersions[i].name == c.Version {
				c.ver = &restVersions[i]
				return c.ver, nil
			}
		}
		names := make([]string, len(restVersions))
		for i, v := range restVersions {
			names[i] = v.name
		}
		return nil, fmt.Errorf("slurmrestd: version %q is not one Prescient speaks (%s)", c.Version, strings.Join(names, ", "))
	}
	var tried []string
	for i := range restVersions {
		v := &restVersions[i]
		path := "/slurm/" + v.name + "/ping"
		status, out, err := c.do(ctx, http.MethodGet, path, nil)
		if status == http.StatusNotFound {
			tried = append(tried, v.name)
			continue
		}
		if err == nil {
			err = documentErr(out, "slurmrestd GET "+path)
		}
		if err != nil {
			return nil, err
		}
		c.ver = v
		return v, nil
	}
	return nil, fmt.Errorf("slurmrestd at %s answers none of %s", c.URL, strings.Join(tried, ", "))
}

// maxResponse bounds a response read: the jobs of a busy cluster in
// JSON run to tens of megabytes.
const maxResponse = 1 << 30

// do sends a request and returns the status and body. A status other
// than 200 is an error that names the request and what the document's
// errors say; the errors of a 200 are for the caller, whose parser of a
// large document reads them in the same pass (post, Accounting).
func (c *REST) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	what := "slurmrestd " + method + " " + path
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", what, err)
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, in)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", what, err)
	}
	if c.Token != nil {
		tok, err := c.Token()
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", what, err)
		}
		req.Header.Set("X-SLURM-USER-TOKEN", tok)
	}
	if c.User != "" {
		req.Header.Set("X-SLURM-USER-NAME", c.User)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err == nil && len(out) > maxResponse {
		err = fmt.Errorf("response over %d bytes", maxResponse)
	}
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s: %s: %w", what, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, out, statusErr(what, resp.StatusCode, out)
	}
	return resp.StatusCode, out, nil
}

// statusErr is the error of a response with a status other than 200:
// slurmrestd answers some failures so, with errors in the document (a
// bad token: 500, "Failed while looking for jobs"), and others with 200
// and errors (an unknown field of an update: post).
func statusErr(what string, status int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	if err := documentErr(body, what); err != nil && json.Valid(body) {
		msg = err.Error()
	}
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return fmt.Errorf("%s: %d %s: %s", what, status, http.StatusText(status), msg)
}

// post sends a change and returns its error: a status other than 200,
// errors in the document, or a job update's result with an error code
// (v0.0.42 on).
func (c *REST) post(ctx context.Context, path string, body any) error {
	_, out, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	what := "slurmrestd POST " + path
	var doc struct {
		slurmErrors
		Results []struct {
			JobID json.RawMessage `json:"job_id"`
			Error string          `json:"error"`
			Code  json.RawMessage `json:"error_code"`
			Why   string          `json:"why"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := doc.err(what); err != nil {
		return err
	}
	var msgs []string
	for _, r := range doc.Results {
		if code, ok, _ := Number(r.Code); ok && code != 0 {
			id := string(bytes.Trim(bytes.TrimSpace(r.JobID), `"`))
			msgs = append(msgs, strings.TrimSpace(fmt.Sprintf("job %s: %s %s", id, r.Error, r.Why)))
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s: Slurm reported %s", what, strings.Join(msgs, "; "))
	}
	return nil
}

// get is a GET of /slurm/VER/path or /slurmdb/VER/path.
func (c *REST) get(ctx context.Context, api, path string, query url.Values) ([]byte, string, error) {
	v, err := c.version(ctx)
	if err != nil {
		return nil, "", err
	}
	p := "/" + api + "/" + v.name + path
	if len(query) > 0 {
		// slurmrestd 22.05 refuses a query with a bare ':' or ','.
		p += "?" + query.Encode()
	}
	_, out, err := c.do(ctx, http.MethodGet, p, nil)
	return out, "slurmrestd GET " + p, err
}

// Jobs implements Client: GET /slurm/VER/jobs.
func (c *REST) Jobs(ctx context.Context) ([]Job, error) {
	out, what, err := c.get(ctx, "slurm", "/jobs", nil)
	if err != nil {
		return nil, err
	}
	return parseJobs(bytes.NewReader(out), what)
}

// Nodes implements Client: GET /slurm/VER/nodes.
func (c *REST) Nodes(ctx context.Context) ([]Node, error) {
	out, what, err := c.get(ctx, "slurm", "/nodes", nil)
	if err != nil {
		return nil, err
	}
	return parseNodes(bytes.NewReader(out), what)
}

// Accounting implements Client: GET /slurmdb/VER/jobs of the jobs that
// ran since a time, a minute earlier for the clocks' skew: a UNIX time
// from v0.0.40 on; for v0.0.38, which takes no UNIX time and reads dates
// in the server's zone, relative to the server's clock (now-N). Jobs
// still running come too; those who read it take the finished ones.
func (c *REST) Accounting(ctx context.Context, since time.Time) ([]byte, error) {
	v, err := c.version(ctx)
	if err != nil {
		return nil, err
	}
	from := strconv.FormatInt(since.Unix()-60, 10)
	if !v.nested {
		ago := int64(math.Ceil(time.Since(since).Seconds())) + 60
		from = "now-" + strconv.FormatInt(max(ago, 60), 10)
	}
	out, what, err := c.get(ctx, "slurmdb", "/jobs", url.Values{"start_time": {from}})
	if err != nil {
		return nil, err
	}
	return out, documentErr(out, what)
}

// Update implements Client: POST /slurm/VER/job/ID for each job. An
// update the version cannot write (AdminComment in v0.0.38) goes to
// Commands whole.
func (c *REST) Update(ctx context.Context, ids []string, u Update) error {
	for _, id := range ids {
		if err := checkID(id); err != nil {
			return err
		}
	}
	if len(ids) == 0 || (u.TimeLimit == nil && u.Nice == nil && u.AdminComment == nil) {
		return nil
	}
	v, err := c.version(ctx)
	if err != nil {
		return err
	}
	if u.AdminComment != nil && !v.comments {
		if c.Commands == nil {
			return c.unsupported(v, "AdminComment")
		}
		return c.Commands.Update(ctx, ids, u)
	}
	body := map[string]any{}
	if u.TimeLimit != nil {
		body["time_limit"] = v.number(minutes(*u.TimeLimit))
	}
	if u.Nice != nil {
		body["nice"] = *u.Nice
	}
	if u.AdminComment != nil {
		body["admin_comment"] = *u.AdminComment
	}
	var errs []error
	for _, id := range ids {
		if err := c.post(ctx, "/slurm/"+v.name+"/job/"+id, body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// number writes n as the version takes a number that may be unset.
func (v *restVersion) number(n int64) any {
	if v.nested {
		return map[string]any{"set": true, "infinite": false, "number": n}
	}
	return n
}

// unsupported is the error for what a version cannot do.
func (c *REST) unsupported(v *restVersion, what string) error {
	return fmt.Errorf("slurmrestd %s cannot change %s and no Slurm commands were given to: %w", v.name, what, errors.ErrUnsupported)
}

// Hold implements Client: a job update with hold true (priority 0).
func (c *REST) Hold(ctx context.Context, id string) error { return c.hold(ctx, id, true) }

// Release implements Client: a job update with hold false.
func (c *REST) Release(ctx context.Context, id string) error { return c.hold(ctx, id, false) }

func (c *REST) hold(ctx context.Context, id string, hold bool) error {
	if err := checkID(id); err != nil {
		return err
	}
	v, err := c.version(ctx)
	if err != nil {
		return err
	}
	return c.post(ctx, "/slurm/"+v.name+"/job/"+id, map[string]any{"hold": hold})
}

// PowerDown implements Client: POST /slurm/VER/node/NAME (v0.0.40 on)
// with the states POWER_DOWN and POWER_DRAIN, which are what scontrol's
// POWER_DOWN_ASAP sends; else Commands.
func (c *REST) PowerDown(ctx context.Context, node, reason string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	return c.power(ctx, node, map[string]any{"state": []string{"POWER_DOWN", "POWER_DRAIN"}, "reason": reason},
		func(cl Client) error { return cl.PowerDown(ctx, node, reason) })
}

// PowerUp implements Client: as PowerDown, with state POWER_UP.
func (c *REST) PowerUp(ctx context.Context, node string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	return c.power(ctx, node, map[string]any{"state": []string{"POWER_UP"}},
		func(cl Client) error { return cl.PowerUp(ctx, node) })
}

func (c *REST) power(ctx context.Context, node string, body map[string]any, commands func(Client) error) error {
	v, err := c.version(ctx)
	if err != nil {
		return err
	}
	if !v.nodes {
		if c.Commands == nil {
			return c.unsupported(v, "a node's power")
		}
		return commands(c.Commands)
	}
	return c.post(ctx, "/slurm/"+v.name+"/node/"+url.PathEscape(node), body)
}

// Priority implements Client through Commands: slurmrestd publishes no
// priority settings.
func (c *REST) Priority(ctx context.Context) (Priority, error) {
	if c.Commands == nil {
		return Priority{}, fmt.Errorf("slurmrestd publishes no priority settings and no Slurm commands were given to read them: %w", errors.ErrUnsupported)
	}
	return c.Commands.Priority(ctx)
}

// What REST may lack: the levers Lacks names.
const (
	LeverComment  = "AdminComment"
	LeverPower    = "node power"
	LeverPriority = "priority settings"
)

// Lacks names what this server's version cannot do without Commands:
// LeverComment, LeverPower and LeverPriority.
func (c *REST) Lacks(ctx context.Context) ([]string, error) {
	v, err := c.version(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	if !v.comments {
		out = append(out, LeverComment)
	}
	if !v.nodes {
		out = append(out, LeverPower)
	}
	return append(out, LeverPriority), nil
}

// LacksFor is what Lacks names that cfg pulls: the comment for the
// advice note and the marks of lowered limits and holds, node power for
// parking, the priority settings for ordering.
func (c *REST) LacksFor(ctx context.Context, cfg Config) ([]string, error) {
	lacks, err := c.Lacks(ctx)
	if err != nil {
		return nil, err
	}
	uses := map[string]bool{
		LeverComment:  cfg.Comment || cfg.Autopilot && (len(cfg.Partitions) > 0 || cfg.Holder != nil && len(cfg.HoldQOS) > 0),
		LeverPower:    cfg.Autopilot && cfg.ParkIdleAfter > 0,
		LeverPriority: cfg.Autopilot && len(cfg.Order) > 0,
	}
	return slices.DeleteFunc(lacks, func(l string) bool { return !uses[l] }), nil
}
