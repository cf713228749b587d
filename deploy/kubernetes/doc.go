// Package kubernetes holds Prescient's Kubernetes manifests (the control
// plane's StatefulSet, the least-rights RBAC of it and of the node agent,
// the ConfigMap, the node agent's DaemonSet) and the Grafana dashboard,
// embedded so that tests (here and in test/kubernetes) decode and apply
// exactly the files that ship.
package kubernetes
