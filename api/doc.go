// Package api is Prescient's HTTP face: health and readiness probes now; the
// /v1 routes, auth, the OpenAPI document and the dashboard arrive with the
// control-plane issue. It reaches the rest of Prescient only through
// interfaces. Errors are JSON: {"error": {"code": "...", "message": "..."}}.
package api
