// Package api is Prescient's HTTP face, on gin: the probes (/healthz,
// /readyz), Prometheus metrics (/metrics), the OpenAPI document
// (/v1/openapi.json) and the /v1 routes over a service.Service (jobs,
// fleet, predict, what-if, recommendations, stats, models, mode), with the
// agent hub mounted under /v1/agents/ and the dashboard at /.
//
// Every /v1 request carries a bearer token from the tokens file (Tokens,
// ParseTokens; Server.SetTokens replaces them when the file is read
// again), bound to a tenant and a role: viewers read, submitters also
// submit and cancel, admins do everything for every tenant, agents reach
// only /v1/agents/. No valid token is 401, the wrong role or tenant 403.
// Request bodies are one JSON object with no unknown fields, at most 1 MiB
// by default; errors are JSON: {"error": {"code": "...", "message": "..."}}.
// The package reaches the rest of Prescient only through service.Service.
package api
