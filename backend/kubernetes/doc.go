// Package kubernetes is the Kubernetes backend of autopilot and advisor:
// Prescient as a secondary scheduler for pods with schedulerName
// "prescient".
//
// It watches Nodes (their GPUs from allocatable nvidia.com/gpu and NVIDIA
// GPU feature discovery's nvidia.com/gpu.* labels, topology from
// prescient.io/rack, prescient.io/leaf and prescient.io/nvlink-domain) and
// is the control plane's NodeSource. A node's MIG instances
// (nvidia.com/mig-PROFILE) are a node of their own, NODE:mig-PROFILE,
// whose GPUs only pods asking for the profile take. The GPUs, CPU and
// memory that other schedulers' bound, unfinished pods hold are taken off
// their nodes.
//
// It watches Pods of its scheduler and submits each as a job: a gang of
// pods sharing prescient.io/gang is one job, once prescient.io/gang-size
// members exist; the pods of a batch Job that is one unit of work (or of
// one index of an Indexed Job) are one job across the pods its controller
// makes, with the Job's activeDeadlineSeconds as its deadline. Start binds
// the pods through the Binding subresource, Checkpoint annotates them with
// prescient.io/checkpoint-requested, and Stop evicts them through the
// Eviction API. Without kubelets a pod never runs: a pod counts as started
// once bound, and its GPUs are free once its object is gone. In advisor
// mode it writes prescient.io/recommendation annotations and Events and
// binds nothing.
//
// It is the control plane's Cordoner too: a node the plane parks is
// cordoned and annotated prescient.io/parked until it is woken, and a
// node where other schedulers' pods run, or a node of MIG instances, is
// not parked (parking.go).
package kubernetes
