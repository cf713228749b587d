// Package lending is the live plane's lending of idle inference nodes to
// training, taking them back before the inference demand returns. The
// decisions are executor/lend's (lend.Policy.Decide, lend.Urgent,
// lend.TakeBack); this package reads the state they need, carries them
// out and keeps the loans in the store.
//
// An inference pool is the nodes whose cluster.PoolLabel is one of Pools.
// They serve inference and take no training unless lent. Each minute the
// plane reads the utilization of the pool's serving GPUs (the demand: a
// GPU at or above the idle threshold, or not seen, is busy); every Every
// it forecasts the pool's idle GPUs with the published idle model
// (lend.Model at Level, capped by what was idle throughout Recent) or,
// without one, with the reactive rule lend.Recent, and lend.Policy.Decide
// lends and takes back whole nodes. When every serving GPU is busy a lent
// node is taken back at once (lend.Urgent).
//
// In autopilot a lent node takes training Handover after the loan (the
// inference service moves its replicas off: it hears the node_lent,
// node_returning and node_serving webhooks, or reads the loans in GET
// /v1/fleet, each node's "loan"); a node taken back takes no new jobs,
// its jobs are told to checkpoint and stop within Notice (a job that
// cannot checkpoint stops at once), and it serves inference again once
// they are gone. Loans are kept in the store. In advisor mode the
// decisions are recommendations ("lend", "reclaim") and nothing is lent.
package lending
