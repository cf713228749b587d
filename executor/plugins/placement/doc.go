// Package placement holds the node-scoring placement policies and the
// machinery they share: a node's free resources as a scorer sees them
// (Node), a job's request (Request), the fit filter, and the
// fragmentation measure of the FGD paper (Weng et al., "Beware of
// Fragmentation", USENIX ATC'23) over a distribution of typical requests
// (frag.go).
//
// The baselines (best-fit, dot-product, gpu-packing, gpu-clustering,
// random, fgd; baselines.go, fgd.go) follow their definitions in the FGD
// authors' simulator, hkust-adsl/kubernetes-scheduler-simulator
// (pkg/simulator/plugin): the same integer scores and the same GPU
// selection inside a node. spread is the energy-blind least-loaded
// placement. prescient ranks placements by the fragmentation they add on
// FGD's score levels and packs among equals (fgd.go).
//
// A Scorer rates one node for one request; Place (place.go) runs filter,
// score and selection over a list of nodes — the fill experiment
// (executor/sim) uses it. Placer (placer.go) is the planner's plugin: per
// planning cycle it learns the requests the cluster receives, who shares
// which GPU and the forecast memory footprints, and places shares under the
// tenant and memory rules and MIG geometry (share.go, mig.go), whole-GPU
// jobs by NVLink domain, node and leaf (whole.go, tasks.go), weighing for
// prescient how long a placement keeps a node on (energy.go).
package placement
