// Package executortest is the executor's scenario harness: a fleet, a queue
// with forecasts, running jobs on given GPUs, a policy, and the plan that
// comes out, with fluent builders so a test reads as its specification:
//
//	s := executortest.NewScenario(t, "prescient").Nodes(clustertest.Node("n1").GPUs(8, "V100").Obj())
//	s.Running(clustertest.Job("old").GPUs(4).Tier(cluster.TierBatch).Obj()).On("n1", 0, 1, 2, 3).For(2*time.Hour).Forecast(3*time.Hour, 4*time.Hour)
//	s.Queued(clustertest.Job("new").GPUs(8).Obj()).Forecast(time.Hour, time.Hour)
//	plan := s.Plan()
package executortest
