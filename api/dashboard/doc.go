// Package dashboard is Prescient's web dashboard: one page of plain HTML, CSS
// and JavaScript, embedded in the binary, that asks for an API token, keeps
// it in the browser session (sessionStorage) and shows what the /v1 JSON API
// answers: fleet utilization and power over time, GPUs and their jobs, queue
// wait by tier and tenant, completions and failures with their reasons, cost
// per workload, forecasts against actuals, the advisor's recommendations and
// the job list, with a form to submit a job. Charts are inline SVG drawn by
// the page's own code; there is no build step. Handler serves it; the API
// server mounts it at /.
package dashboard
