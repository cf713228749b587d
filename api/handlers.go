package api

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// handlers serve the /v1 routes over a service.Service. Authorization by
// role has happened before a handler runs; tenancy is checked here:
// everyone but an admin sees and changes only their own tenant's jobs.
type handlers struct {
	svc     service.Service
	log     *slog.Logger
	maxBody int64
}

// JobList answers GET /v1/jobs. Next, when set, is the after= of the next
// page: the page was full, and more may follow.
type JobList struct {
	Jobs []service.JobStatus `json:"jobs"`
	Next cluster.JobID       `json:"next,omitempty"`
}

// JobEventList answers GET /v1/jobs/{id}/events.
type JobEventList struct {
	Job    cluster.JobID      `json:"job"`
	Events []service.JobEvent `json:"events"`
}

// RecommendationList answers GET /v1/recommendations.
type RecommendationList struct {
	Recommendations []service.Recommendation `json:"recommendations"`
}

// ModelList answers GET /v1/models.
type ModelList struct {
	Models []service.ModelVersion `json:"models"`
}

// Identity answers GET /v1/whoami: the tenant and role the token speaks
// for, so that a client such as the dashboard shows only what it may do.
type Identity struct {
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant"`
	Role   Role   `json:"role"`
}

// StatusBody answers requests that start something.
type StatusBody struct {
	Status string `json:"status"`
}

// ownedJobsLimit bounds the listing used to tell a tenant's jobs apart in
// fleet and what-if answers; beyond it a tenant's jobs are hidden, never
// another's shown.
const ownedJobsLimit = 100_000

// tenantFor is the tenant a request acts for: the token's, or for an admin
// the one asked for. Anyone else asking for another tenant is refused.
func tenantFor(c *gin.Context, asked, field string) (string, bool) {
	p := principal(c)
	switch {
	case asked == "" || asked == p.Tenant:
		return p.Tenant, true
	case p.Role == RoleAdmin:
		if len(asked) > maxTenantBytes {
			abortRequest(c, badRequest("%s: %d bytes; at most %d", field, len(asked), maxTenantBytes))
			return "", false
		}
		return asked, true
	}
	writeError(c, http.StatusForbidden, "forbidden", fmt.Sprintf("%s: a %s token of tenant %s may not act for tenant %s", field, p.Role, p.Tenant, asked))
	return "", false
}

// mayTouch reports whether the principal may see or change a job of tenant.
func mayTouch(p Principal, tenant string) bool { return p.Role == RoleAdmin || p.Tenant == tenant }

// submit is POST /v1/jobs: 201 with the job, or 200 with the stored one
// when the same ID and spec were submitted before.
func (h *handlers) submit(c *gin.Context) {
	var req SubmitRequest
	if e := readJSON(c, h.maxBody, &req, false); e != nil {
		abortRequest(c, e)
		return
	}
	tenant, ok := tenantFor(c, req.Tenant, "tenant")
	if !ok {
		return
	}
	sub, err := req.toSubmit("", tenant)
	if err != nil {
		abortRequest(c, badRequest("%s", err))
		return
	}
	status := http.StatusCreated
	if sub.ID != "" {
		if tenant, err := h.svc.JobTenant(c.Request.Context(), sub.ID); err == nil {
			if !mayTouch(principal(c), tenant) {
				writeError(c, http.StatusConflict, "conflict", fmt.Sprintf("job ID %s is taken", sub.ID))
				return
			}
			status = http.StatusOK
		}
	}
	st, err := h.svc.Submit(c.Request.Context(), sub)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	c.Header("Location", "/v1/jobs/"+url.PathEscape(string(st.ID)))
	writeJSON(c, status, st)
}

// listJobs is GET /v1/jobs?tenant=&state=&label=k=v&limit=&after=: after
// (the answer's next) continues a listing.
func (h *handlers) listJobs(c *gin.Context) {
	q, ok := h.jobQuery(c)
	if !ok {
		return
	}
	jobs, err := h.svc.Jobs(c.Request.Context(), q)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if jobs == nil {
		jobs = []service.JobStatus{}
	}
	list := JobList{Jobs: jobs}
	if limit := cmp.Or(q.Limit, service.DefaultJobsLimit); len(jobs) == limit {
		list.Next = jobs[len(jobs)-1].ID
	}
	writeJSON(c, http.StatusOK, list)
}

func (h *handlers) jobQuery(c *gin.Context) (service.JobQuery, bool) {
	params := c.Request.URL.Query()
	if e := onlyParams(params, "tenant", "state", "label", "limit", "after"); e != nil {
		abortRequest(c, e)
		return service.JobQuery{}, false
	}
	tenant, ok := tenantFor(c, params.Get("tenant"), "tenant")
	if !ok {
		return service.JobQuery{}, false
	}
	if principal(c).Role == RoleAdmin && params.Get("tenant") == "" {
		tenant = "" // an admin without a tenant lists every tenant's jobs
	}
	q := service.JobQuery{Tenant: tenant, After: cluster.JobID(params.Get("after"))}
	for _, v := range params["state"] {
		for _, s := range strings.Split(v, ",") {
			st, err := cluster.ParseJobState(strings.TrimSpace(s))
			if err != nil {
				abortRequest(c, badRequest("state: %v", err))
				return service.JobQuery{}, false
			}
			q.States = append(q.States, st)
		}
	}
	for _, v := range params["label"] {
		k, val, ok := strings.Cut(v, "=")
		if !ok || !labelKeyPattern.MatchString(k) {
			abortRequest(c, badRequest("label: want key=value, got %q", v))
			return service.JobQuery{}, false
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = val
	}
	var e *requestError
	if q.Limit, e = intParam(params, "limit", 1, maxListLimit); e != nil {
		abortRequest(c, e)
		return service.JobQuery{}, false
	}
	return q, true
}

// job fetches the job of the :id parameter, if the caller may touch it
// (mayTouchJob).
func (h *handlers) job(c *gin.Context) (service.JobStatus, bool) {
	id := cluster.JobID(c.Param("id"))
	st, err := h.svc.Job(c.Request.Context(), id)
	return st, h.mayTouchJob(c, id, st.Tenant, err)
}

// jobID checks that the caller may touch the job of the :id parameter
// (mayTouchJob), reading only its tenant, and returns its ID.
func (h *handlers) jobID(c *gin.Context) (cluster.JobID, bool) {
	id := cluster.JobID(c.Param("id"))
	tenant, err := h.svc.JobTenant(c.Request.Context(), id)
	return id, h.mayTouchJob(c, id, tenant, err)
}

// mayTouchJob reports, for a lookup of job id that gave its tenant or
// err, whether the caller may touch the job; when not, it answers. Another
// tenant's job is answered as a missing one, word for word, so that no
// tenant learns which IDs exist.
func (h *handlers) mayTouchJob(c *gin.Context, id cluster.JobID, tenant string, err error) bool {
	if err == nil && !mayTouch(principal(c), tenant) {
		err = notFound(id)
	}
	if err != nil {
		serviceError(c, h.log, err)
		return false
	}
	return true
}

// notFound is the service's error for a job it does not have.
func notFound(id cluster.JobID) error { return fmt.Errorf("job %s: %w", id, service.ErrNotFound) }

// getJob is GET /v1/jobs/{id}.
func (h *handlers) getJob(c *gin.Context) {
	if st, ok := h.job(c); ok {
		writeJSON(c, http.StatusOK, st)
	}
}

// jobEvents is GET /v1/jobs/{id}/events: the job's history, oldest first.
func (h *handlers) jobEvents(c *gin.Context) {
	id, ok := h.jobID(c)
	if !ok {
		return
	}
	evs, err := h.svc.JobEvents(c.Request.Context(), id)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	writeJSON(c, http.StatusOK, JobEventList{Job: id, Events: evs})
}

// jobLog is GET /v1/jobs/{id}/log?attempt=N&bytes=N: the end of an
// attempt's log (the newest by default) on each node it ran on.
func (h *handlers) jobLog(c *gin.Context) {
	params := c.Request.URL.Query()
	if e := onlyParams(params, "attempt", "bytes"); e != nil {
		abortRequest(c, e)
		return
	}
	attempt, e := intParam(params, "attempt", 1, math.MaxInt32)
	if e != nil {
		abortRequest(c, e)
		return
	}
	size, e := intParam(params, "bytes", 1, service.MaxLogBytes)
	if e != nil {
		abortRequest(c, e)
		return
	}
	id, ok := h.jobID(c)
	if !ok {
		return
	}
	log, err := h.svc.JobLog(c.Request.Context(), id, attempt, cmp.Or(size, service.DefaultLogBytes))
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	writeJSON(c, http.StatusOK, log)
}

// cancel is DELETE /v1/jobs/{id} and POST /v1/jobs/{id}/cancel.
func (h *handlers) cancel(c *gin.Context) {
	id, ok := h.jobID(c)
	if !ok {
		return
	}
	st, err := h.svc.Cancel(c.Request.Context(), id)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	writeJSON(c, http.StatusOK, st)
}

// fleet is GET /v1/fleet. A non-admin sees every GPU's allocation but only
// its own tenant's job IDs.
func (h *handlers) fleet(c *gin.Context) {
	fs, err := h.svc.Fleet(c.Request.Context())
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if p := principal(c); p.Role != RoleAdmin {
		own, ok := h.ownJobs(c, p.Tenant, cluster.StateRunning, cluster.StateCheckpointing)
		if !ok {
			return
		}
		for i := range fs.Nodes {
			for j := range fs.Nodes[i].GPUs {
				g := &fs.Nodes[i].GPUs[j]
				g.Jobs = slices.DeleteFunc(slices.Clone(g.Jobs), func(id cluster.JobID) bool { return !own[id] })
			}
		}
	}
	writeJSON(c, http.StatusOK, fs)
}

// ownJobs is the set of the tenant's jobs in the given states.
func (h *handlers) ownJobs(c *gin.Context, tenant string, states ...cluster.JobState) (map[cluster.JobID]bool, bool) {
	jobs, err := h.svc.Jobs(c.Request.Context(), service.JobQuery{Tenant: tenant, States: states, Limit: ownedJobsLimit})
	if err != nil {
		serviceError(c, h.log, err)
		return nil, false
	}
	own := make(map[cluster.JobID]bool, len(jobs))
	for _, j := range jobs {
		own[j.ID] = j.Tenant == tenant
	}
	return own, true
}

// tenantsOf returns a function that answers a job's tenant, asking the
// Service once per job; "" for a job it cannot find. It serves answers that
// name few jobs (recommendations, the window's forecast checks), where
// listing a tenant's whole history would cost more.
func (h *handlers) tenantsOf(c *gin.Context) func(cluster.JobID) string {
	seen := map[cluster.JobID]string{}
	return func(id cluster.JobID) string {
		t, ok := seen[id]
		if !ok {
			if tenant, err := h.svc.JobTenant(c.Request.Context(), id); err == nil {
				t = tenant
			}
			seen[id] = t
		}
		return t
	}
}

// predict is POST /v1/predict.
func (h *handlers) predict(c *gin.Context) {
	var req PredictRequest
	if e := readJSON(c, h.maxBody, &req, false); e != nil {
		abortRequest(c, e)
		return
	}
	if n := len(req.Jobs); n == 0 || n > maxSpecsPerCall {
		abortRequest(c, badRequest("jobs: %d jobs; want 1 to %d", n, maxSpecsPerCall))
		return
	}
	specs := make([]cluster.JobSpec, len(req.Jobs))
	var errs []string
	for i, j := range req.Jobs {
		field := fmt.Sprintf("jobs[%d].", i)
		tenant, ok := tenantFor(c, j.Tenant, field+"tenant")
		if !ok {
			return
		}
		s, err := j.toSpec(field, tenant)
		if err != nil {
			errs = append(errs, err.Error())
		}
		specs[i] = s
	}
	if len(errs) > 0 {
		abortRequest(c, badRequest("%s", strings.Join(errs, "\n")))
		return
	}
	fcs, err := h.svc.Predict(c.Request.Context(), specs)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	writeJSON(c, http.StatusOK, PredictResponse{Forecasts: fcs})
}

// recommendations is GET /v1/recommendations?since=&limit=. A non-admin
// sees those about its tenant's jobs and those about no job.
func (h *handlers) recommendations(c *gin.Context) {
	params := c.Request.URL.Query()
	if e := onlyParams(params, "since", "limit"); e != nil {
		abortRequest(c, e)
		return
	}
	var since time.Time
	if s := params.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			abortRequest(c, badRequest("since: %q is not an RFC 3339 time (e.g. 2026-01-05T09:00:00Z)", s))
			return
		}
		since = t.UTC()
	}
	limit, e := intParam(params, "limit", 1, maxListLimit)
	if e != nil {
		abortRequest(c, e)
		return
	}
	recs, err := h.svc.Recommendations(c.Request.Context(), since, limit)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if p := principal(c); p.Role != RoleAdmin {
		tenantOf := h.tenantsOf(c)
		recs = slices.DeleteFunc(recs, func(r service.Recommendation) bool { return r.Job != "" && tenantOf(r.Job) != p.Tenant })
	}
	if recs == nil {
		recs = []service.Recommendation{}
	}
	writeJSON(c, http.StatusOK, RecommendationList{Recommendations: recs})
}

// whatIf is POST /v1/whatif. A non-admin may add jobs for its tenant and
// remove only its own, and sees in the answer its own and the hypothetical
// jobs (the summaries are fleet-wide).
func (h *handlers) whatIf(c *gin.Context) {
	var body WhatIfRequest
	if e := readJSON(c, h.maxBody, &body, false); e != nil {
		abortRequest(c, e)
		return
	}
	req, ok := h.whatIfRequest(c, body)
	if !ok {
		return
	}
	p := principal(c)
	var own map[cluster.JobID]bool
	if p.Role != RoleAdmin {
		if own, ok = h.ownJobs(c, p.Tenant, cluster.StateQueued, cluster.StateRunning, cluster.StateCheckpointing); !ok {
			return
		}
		for i, id := range req.RemoveJobs {
			if !own[id] { // another tenant's and a missing job alike
				abortRequest(c, badRequest("remove_jobs[%d]: %s is not a queued or running job of tenant %s", i, id, p.Tenant))
				return
			}
		}
	}
	res, err := h.svc.WhatIf(c.Request.Context(), req)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if own != nil {
		res.Jobs = slices.DeleteFunc(res.Jobs, func(j service.WhatIfJob) bool { return !j.Hypothetical && !own[j.Job] })
	}
	writeJSON(c, http.StatusOK, res)
}

func (h *handlers) whatIfRequest(c *gin.Context, body WhatIfRequest) (service.WhatIfRequest, bool) {
	fe := &fieldErrs{}
	if len(body.AddJobs) > maxSpecsPerCall {
		fe.add("add_jobs", "%d jobs; at most %d", len(body.AddJobs), maxSpecsPerCall)
	}
	if len(body.AddNodes) > maxSpecsPerCall {
		fe.add("add_nodes", "%d nodes; at most %d", len(body.AddNodes), maxSpecsPerCall)
	}
	if len(body.RemoveJobs) > maxRemovedPerReq || len(body.RemoveNodes) > maxRemovedPerReq {
		fe.add("remove_jobs", "at most %d jobs and %d nodes", maxRemovedPerReq, maxRemovedPerReq)
	}
	if len(body.Policy) > maxPolicyBytes {
		fe.add("policy", "%d bytes; at most %d", len(body.Policy), maxPolicyBytes)
	}
	if err := fe.err(); err != nil {
		abortRequest(c, badRequest("%s", err))
		return service.WhatIfRequest{}, false
	}
	req := service.WhatIfRequest{Policy: body.Policy, Horizon: seconds(fe, "horizon_s", body.HorizonS, maxHorizon)}
	if len(body.Tenants) > 0 {
		// JSON is YAML: the list reads as a tenants file's, with its checks.
		doc := append(append([]byte(`{"tenants": `), body.Tenants...), '}')
		ts, err := cluster.ReadTenantsFile(bytes.NewReader(doc), "tenants")
		if err != nil {
			fe.errs = append(fe.errs, err)
		}
		req.Tenants = ts
	}
	for i, a := range body.AddJobs {
		field := fmt.Sprintf("add_jobs[%d].", i)
		tenant, ok := tenantFor(c, a.Tenant, field+"tenant")
		if !ok {
			return service.WhatIfRequest{}, false
		}
		sub, err := a.toSubmit(field, tenant)
		if err != nil {
			fe.errs = append(fe.errs, unjoin(err)...)
		}
		req.AddJobs = append(req.AddJobs, sub)
	}
	for i, id := range body.RemoveJobs {
		if id == "" || len(id) > maxIDBytes || !utf8.ValidString(id) {
			fe.add(fmt.Sprintf("remove_jobs[%d]", i), "want a job ID of 1 to %d bytes", maxIDBytes)
		}
		req.RemoveJobs = append(req.RemoveJobs, cluster.JobID(id))
	}
	for i, n := range body.AddNodes {
		node, err := n.toNode(fmt.Sprintf("add_nodes[%d].", i))
		if err != nil {
			fe.errs = append(fe.errs, unjoin(err)...)
		}
		req.AddNodes = append(req.AddNodes, node)
	}
	for i, n := range body.RemoveNodes {
		if n == "" || len(n) > maxNameBytes {
			fe.add(fmt.Sprintf("remove_nodes[%d]", i), "want a node name of 1 to %d bytes", maxNameBytes)
		}
	}
	req.RemoveNodes = body.RemoveNodes
	if err := fe.err(); err != nil {
		abortRequest(c, badRequest("%s", err))
		return service.WhatIfRequest{}, false
	}
	return req, true
}

// stats is GET /v1/stats?window_s=&step_s=. A non-admin sees the fleet's
// series and the tier waits, and of the per-tenant figures only its own.
func (h *handlers) stats(c *gin.Context) {
	params := c.Request.URL.Query()
	if e := onlyParams(params, "window_s", "step_s"); e != nil {
		abortRequest(c, e)
		return
	}
	fe := &fieldErrs{}
	q := service.StatsQuery{
		Window: seconds(fe, "window_s", floatParam(fe, params, "window_s"), maxStatsWindow),
		Step:   seconds(fe, "step_s", floatParam(fe, params, "step_s"), maxStatsWindow),
	}
	if q.Step > 0 && (q.Window == 0 && 24*time.Hour/q.Step > maxStatsPoints || q.Window/q.Step > maxStatsPoints) {
		fe.add("step_s", "gives more than %d points", maxStatsPoints)
	}
	if err := fe.err(); err != nil {
		abortRequest(c, badRequest("%s", err))
		return
	}
	st, err := h.svc.Stats(c.Request.Context(), q)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if p := principal(c); p.Role != RoleAdmin {
		st.WaitByTenant = slices.DeleteFunc(st.WaitByTenant, func(w service.WaitStat) bool { return w.Key != p.Tenant })
		st.Quotas = slices.DeleteFunc(st.Quotas, func(q service.QuotaUsage) bool { return q.Tenant != p.Tenant })
		st.Cost = slices.DeleteFunc(st.Cost, func(cs service.CostStat) bool {
			return cs.Workload != p.Tenant && !strings.HasPrefix(cs.Workload, p.Tenant+"/")
		})
		tenantOf := h.tenantsOf(c)
		st.Forecasts = slices.DeleteFunc(st.Forecasts, func(f service.ForecastCheck) bool { return tenantOf(f.Job) != p.Tenant })
	}
	writeJSON(c, http.StatusOK, st)
}

// idleForecast is GET /v1/forecasts/idle. A non-admin sees the GPUs and
// counts of the whole fleet but only their own tenant's idle jobs.
func (h *handlers) idleForecast(c *gin.Context) {
	params := c.Request.URL.Query()
	if e := onlyParams(params, "horizon_s", "step_s", "min_window_s", "min_probability", "pool", "node"); e != nil {
		abortRequest(c, e)
		return
	}
	q, e := idleQuery(params)
	if e != nil {
		abortRequest(c, e)
		return
	}
	f, err := h.svc.IdleForecast(c.Request.Context(), q)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if p := principal(c); p.Role != RoleAdmin {
		tenantOf := h.tenantsOf(c)
		f.IdleJobs = slices.DeleteFunc(f.IdleJobs, func(j service.IdleJob) bool { return tenantOf(j.Job) != p.Tenant })
	}
	writeJSON(c, http.StatusOK, f)
}

// idleQuery reads an idle forecast's query parameters; the errors name
// the parameter.
func idleQuery(params url.Values) (service.IdleQuery, *requestError) {
	fe := &fieldErrs{}
	q := service.IdleQuery{
		Horizon:   seconds(fe, "horizon_s", floatParam(fe, params, "horizon_s"), service.MaxIdleHorizon),
		Step:      seconds(fe, "step_s", floatParam(fe, params, "step_s"), service.MaxIdleHorizon),
		MinWindow: seconds(fe, "min_window_s", floatParam(fe, params, "min_window_s"), service.MaxIdleHorizon),
		Pool:      params.Get("pool"),
		Node:      params.Get("node"),
	}
	if q.Step > 0 && q.Step < time.Minute {
		fe.add("step_s", "%g: want at least 60", q.Step.Seconds())
	}
	if q.Horizon > 0 && q.Step > 0 && q.Horizon/q.Step > service.MaxIdleSteps {
		fe.add("step_s", "horizon_s over step_s is more than %d steps", service.MaxIdleSteps)
	}
	if p := floatParam(fe, params, "min_probability"); p < 0 || p > 1 || math.IsNaN(p) {
		fe.add("min_probability", "%g: want a chance in (0, 1]", p)
	} else {
		q.MinProbability = p
	}
	for _, k := range []string{"pool", "node"} {
		if v := params.Get(k); len(v) > maxNameBytes || !utf8.ValidString(v) {
			fe.add(k, "want a name of at most %d bytes of UTF-8", maxNameBytes)
		}
	}
	if err := fe.err(); err != nil {
		return q, badRequest("%s", err)
	}
	return q, nil
}

// models is GET /v1/models.
func (h *handlers) models(c *gin.Context) {
	ms, err := h.svc.Models(c.Request.Context())
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	if ms == nil {
		ms = []service.ModelVersion{}
	}
	writeJSON(c, http.StatusOK, ModelList{Models: ms})
}

// tenants is GET /v1/tenants: the tenants in force, their source and
// their use of their quotas.
func (h *handlers) tenants(c *gin.Context) {
	if e := onlyParams(c.Request.URL.Query()); e != nil {
		abortRequest(c, e)
		return
	}
	info, err := h.svc.Tenants(c.Request.Context())
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	writeJSON(c, http.StatusOK, info)
}

// retrain is POST /v1/models/retrain: 202 once the run has started.
func (h *handlers) retrain(c *gin.Context) {
	if e := readJSON(c, h.maxBody, &struct{}{}, true); e != nil {
		abortRequest(c, e)
		return
	}
	if err := h.svc.Retrain(c.Request.Context()); err != nil {
		serviceError(c, h.log, err)
		return
	}
	h.log.Info("retraining started", "by", principal(c).Name, "tenant", principal(c).Tenant)
	writeJSON(c, http.StatusAccepted, StatusBody{Status: "started"})
}

// rollback is POST /v1/models/{target}/rollback.
func (h *handlers) rollback(c *gin.Context) {
	var req RollbackRequest
	if e := readJSON(c, h.maxBody, &req, true); e != nil {
		abortRequest(c, e)
		return
	}
	if req.To < 0 {
		abortRequest(c, badRequest("to: %d is negative (0 means the version before the current)", req.To))
		return
	}
	mv, err := h.svc.Rollback(c.Request.Context(), c.Param("target"), req.To)
	if err != nil {
		serviceError(c, h.log, err)
		return
	}
	h.log.Info("model rolled back", "target", mv.Target, "version", mv.Version, "by", principal(c).Name)
	writeJSON(c, http.StatusOK, mv)
}

// whoami is GET /v1/whoami.
func (h *handlers) whoami(c *gin.Context) {
	p := principal(c)
	writeJSON(c, http.StatusOK, Identity{Name: p.Name, Tenant: p.Tenant, Role: p.Role})
}

// getMode is GET /v1/mode.
func (h *handlers) getMode(c *gin.Context) {
	writeJSON(c, http.StatusOK, ModeBody{Mode: h.svc.Mode()})
}

// setMode is PUT /v1/mode.
func (h *handlers) setMode(c *gin.Context) {
	var req ModeBody
	if e := readJSON(c, h.maxBody, &req, false); e != nil {
		abortRequest(c, e)
		return
	}
	if req.Mode != service.ModeAdvisor && req.Mode != service.ModeAutopilot {
		abortRequest(c, badRequest("mode: %q is not advisor or autopilot", req.Mode))
		return
	}
	if err := h.svc.SetMode(c.Request.Context(), req.Mode); err != nil {
		serviceError(c, h.log, err)
		return
	}
	h.log.Info("mode changed", "mode", req.Mode, "by", principal(c).Name)
	writeJSON(c, http.StatusOK, ModeBody{Mode: h.svc.Mode()})
}

// onlyParams refuses query parameters other than those named.
func onlyParams(q url.Values, known ...string) *requestError {
	for k := range q {
		if !slices.Contains(known, k) {
			return &requestError{code: "unknown_parameter", msg: fmt.Sprintf("unknown query parameter %q (want %s)", k, strings.Join(known, ", "))}
		}
	}
	return nil
}

// intParam is an integer query parameter in lo..hi; 0 when absent.
func intParam(q url.Values, name string, lo, hi int) (int, *requestError) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s: %q is not an integer in %d..%d", name, s, lo, hi)
	}
	return n, nil
}

// floatParam is a number query parameter; 0 when absent.
func floatParam(fe *fieldErrs, q url.Values, name string) float64 {
	s := q.Get(name)
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		fe.add(name, "%q is not a number", s)
		return 0
	}
	return f
}
