// Package protocol is what the node agent and the control plane's hub
// (backend/agenthub) say to each other over HTTP (DESIGN.md section 6):
// the routes, the requests and answers with their strict decoders and
// checks, and the checkpoint acknowledgement a job writes for its agent
// (Ack), which the Kubernetes node agent reads too. It imports neither
// side.
package protocol
