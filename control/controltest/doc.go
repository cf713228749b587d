// Package controltest has Fake, an in-memory service.Service with behaviour
// for the tests of the HTTP API and the dashboard: it keeps submitted jobs,
// filters them by tenant, state and labels, cancels them, answers Predict
// from the spec by a documented rule, simulates what-if questions with a
// small greedy list scheduler, computes stats from its jobs, and keeps model
// versions that Retrain and Rollback change. Tests move jobs through their
// lives with Start, Checkpoint, Preempt and Finish (Job then shows each
// attempt, its GPUs, what ended it and its GPU-hours, as the control plane
// does), give an attempt's log text with SetJobLog, and make a method fail
// with FailWith.
//
//	f := controltest.New(controltest.WithNodes(clustertest.Node("n1").GPUs(8, "A100-SXM4-80GB").Obj()))
//	st, _ := f.Submit(ctx, service.SubmitRequest{Spec: spec})
//	_ = f.Start(st.ID, "n1", 0, 1)
package controltest
