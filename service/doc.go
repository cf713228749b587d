// Package service is the control plane's contract with those around it:
// Service, what the HTTP API asks of the plane, with the requests and
// answers it trades and the errors it wraps (ErrInvalid, ErrNotFound,
// ErrConflict); and what the plane is plugged into: NodeSource, Notifier,
// RecommendationSink and Cordoner. It sits below control, api and the
// backends, so that a backend (backend/kubernetes) can submit jobs and
// receive recommendations without importing the plane.
package service
