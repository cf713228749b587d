package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/service"
)

// loadClients are the load tests' numbers of concurrent clients over
// loopback HTTP, each sending its requests one after the other: one client
// measures a request alone, four a request among others.
var loadClients = []int{1, 4}

// runLoad runs the load as one sub-benchmark per number of clients; each
// iteration sends perIteration requests, split among the clients.
func runLoad(b *testing.B, s *loadStack, perIteration int, path, token, body string) {
	for _, c := range loadClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) { s.load(b, c, perIteration/c, path, token, body) })
	}
}

// The load tests' jobs are of the synthetic generator's workloads, which
// the models learned from.

// BenchmarkLoadPredict is POST /v1/predict of one job spec against the
// real stack (newLoadStack: the demo fleet with 4 running and 1,000 queued
// jobs, models trained on synthetic history) under a bounded load: each
// iteration is 400 requests. Target: p99 under 10 ms.
func BenchmarkLoadPredict(b *testing.B) {
	s := newLoadStack(b)
	const body = `{"jobs":[{"name":"bert","tier":"standard","gpus":4,"labels":{"framework":"tensorflow","model":"bert","batch_size":"32"}}]}`
	code, out, err := s.post("/v1/predict", loadViewerToken, body)
	if err != nil || code != http.StatusOK {
		b.Fatalf("POST /v1/predict = %d, %v: %s", code, err, out)
	}
	var res api.PredictResponse
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("predict answer: %v: %s", err, out)
	}
	if len(res.Forecasts) != 1 || res.Forecasts[0].DurationP50S <= 0 || !strings.HasPrefix(res.Forecasts[0].Source, "model ") {
		b.Fatalf("predict answer is not one learned forecast: %s", out)
	}
	runLoad(b, s, 400, "/v1/predict", loadViewerToken, body)
}

// BenchmarkLoadWhatIf is POST /v1/whatif of one hypothetical 8-GPU job
// against the same stack: each answer is two simulations of the 1,004
// live jobs (plus the new one) from the state read from the store. Each
// iteration is 20 requests. Target: p99 under 200 ms.
func BenchmarkLoadWhatIf(b *testing.B) {
	s := newLoadStack(b)
	const body = `{"add_jobs":[{"id":"what-if-1","name":"transformer","tier":"production","gpus":8,"labels":{"framework":"pytorch","model":"transformer","batch_size":"64"}}]}`
	code, out, err := s.post("/v1/whatif", loadAdminToken, body)
	if err != nil || code != http.StatusOK {
		b.Fatalf("POST /v1/whatif = %d, %v: %.500s", code, err, out)
	}
	var res service.WhatIfResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("what-if answer: %v: %.500s", err, out)
	}
	if want := s.running + s.queued + 1; len(res.Jobs) != want {
		b.Fatalf("what-if answers %d jobs, want %d", len(res.Jobs), want)
	}
	hypo := 0
	for _, j := range res.Jobs {
		if j.Hypothetical {
			hypo++
			if j.Start == nil || j.End == nil {
				b.Fatalf("the hypothetical job has no predicted start or end: %+v", j)
			}
		}
	}
	if hypo != 1 || res.Policy != loadPolicy {
		b.Fatalf("what-if answer has %d hypothetical jobs and policy %q, want 1 and %s", hypo, res.Policy, loadPolicy)
	}
	runLoad(b, s, 20, "/v1/whatif", loadAdminToken, body)
}
