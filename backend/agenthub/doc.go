// Package agenthub is the control plane's side of the node agents
// (`serve --backend agent`): Hub is an executor.Backend whose Start,
// Checkpoint and Stop become commands for the agents, and an http.Handler
// for the agent routes under /v1/agents/ (agent/protocol). Authentication
// is the API's, in front of it.
package agenthub
