// Package kubernetes holds Prescient's Kubernetes deployment as kustomize
// directories: base/ (namespace, the least-rights RBAC of the control plane
// and of the node agent, the Secrets, InfluxDB, the control plane's
// StatefulSet, the node agent's DaemonSet), components/ (parking's node
// rights, the Prometheus Operator's monitors), overlays/ha (a standby
// replica, the models on a shared volume), and the Grafana dashboards, all
// embedded so that tests (here and in test/kubernetes) decode and apply
// exactly the files that ship.
package kubernetes
