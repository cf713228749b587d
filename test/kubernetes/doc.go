// Package kubernetes holds Prescient's integration tests against a real
// kube-apiserver: etcd runs embedded in the test process
// (go.etcd.io/etcd/server/v3/embed) and the API server is the one of
// k8s.io/kubernetes/cmd/kube-apiserver/app/testing. No kubelet runs: nodes
// are plain objects, and a pod "runs" once it is bound.
//
// It is a module of its own so that the main module does not depend on
// k8s.io/kubernetes; go.mod replaces every k8s.io staging module with its
// v0.X.Y release and the main module with ../.. .
package kubernetes
