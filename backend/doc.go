// Package backend holds what every executor.Backend shares, and its
// subfolders hold the backends themselves: agenthub (node agents over
// HTTP, `serve --backend agent`), kubernetes (pods on a Kubernetes
// cluster, `serve --backend kubernetes`) and simbackend (jobs as timers,
// `serve --backend sim` and tests).
//
// Events is the one event pump: a backend emits what it sees without
// ever blocking, and Watch hands the events to the control plane in
// order. No backend imports control: what the plane and the backends
// trade lives below both, in executor (Backend, Assignment, JobEvent)
// and service (NodeSource, Cordoner, RecommendationSink).
package backend
