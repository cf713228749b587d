// Package deploy checks the shipped deployment (deploy/kubernetes) against a
// real kube-apiserver: each kustomization, rendered by kustomize's own
// library, passes a server-side dry-run apply.
//
// It is a package of its own because kustomize imports the plugin package,
// which links a test binary with immediate binding (BIND_NOW); go-nvml's
// symbols, resolved only once libnvidia-ml.so is loaded, would then stop
// the binaries of the packages that link the agent before they start.
package deploy
