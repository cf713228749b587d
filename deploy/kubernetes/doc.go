// Package kubernetes holds Prescient's Kubernetes manifests (the control
// plane's Deployment, its least-rights RBAC, the ConfigMap, the collector's
// DaemonSet) and the Grafana dashboard, embedded so that tests (here and
// in test/kubernetes) decode and apply exactly the files that ship.
package kubernetes
