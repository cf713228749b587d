// Package dashboard is Prescient's web dashboard: one page of plain HTML, CSS
// and JavaScript modules, embedded in the binary, that asks for an API token,
// keeps it in the browser tab's session (sessionStorage) and shows what the
// /v1 JSON API answers: fleet utilization and power over time, the fleet
// (GPU tiles, or one row per node above 256 GPUs), queue wait by tier and
// tenant, completions and failures with their reasons, cost per workload,
// forecasts against actuals, the jobs filtered by tenant and state and paged,
// a job's detail (attempts, events, log tail), cancel after a confirmation, a
// what-if form, the models and the mode (which an admin may switch), idle
// GPUs ahead, the advisor's recommendations, and a form to submit a job.
// Charts are inline SVG drawn by the page's own code; there is no build step.
// Handler serves it; the API server mounts it at /. docs/dashboard.md says
// what each view shows and how the browser tests and their screenshots work.
package dashboard
