package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/service"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: version %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPIDocumentsEveryRouteAndNoOther compares the document's paths
// and methods with the router's, both ways.
func TestOpenAPIDocumentsEveryRouteAndNoOther(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := New(Config{
		Service: controltest.New(),
		Agents:  http.NotFoundHandler(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	param := regexp.MustCompile(`[:*]([a-z_]+)`)
	routed := map[string]bool{}
	for _, r := range srv.engine.Routes() {
		routed[strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			documented[method+" "+path] = true
		}
	}
	for r := range routed {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("openapi.json documents %s, which no route serves", d)
		}
	}
}

// TestOpenAPISchemasMatchTheGoTypes checks that each schema has exactly the
// JSON fields of the Go type it documents, and that every $ref resolves.
func TestOpenAPISchemasMatchTheGoTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	types := map[string]any{
		"Error": ErrorBody{}, "JobSpecRequest": JobSpecRequest{}, "SubmitRequest": SubmitRequest{},
		"PredictRequest": PredictRequest{}, "PredictResponse": PredictResponse{}, "NodeRequest": NodeRequest{},
		"WhatIfRequest": WhatIfRequest{}, "ModeBody": ModeBody{}, "Identity": Identity{}, "RollbackRequest": RollbackRequest{},
		"JobList": JobList{}, "JobEventList": JobEventList{}, "JobEvent": service.JobEvent{}, "JobLog": service.JobLog{}, "NodeLog": service.NodeLog{}, "RecommendationList": RecommendationList{}, "ModelList": ModelList{}, "StatusBody": StatusBody{},
		"JobStatus": service.JobStatus{}, "JobAttempt": service.JobAttempt{}, "GPUShare": service.GPUShare{}, "Forecast": service.Forecast{}, "FleetState": service.FleetState{},
		"NodeState": service.NodeState{}, "NodeLoan": service.NodeLoan{}, "GPUState": service.GPUState{}, "Recommendation": service.Recommendation{},
		"WhatIfResult": service.WhatIfResult{}, "WhatIfJob": service.WhatIfJob{}, "WhatIfSummary": service.WhatIfSummary{},
		"Stats": service.Stats{}, "StatsPoint": service.StatsPoint{}, "WaitStat": service.WaitStat{},
		"FailureReason": service.FailureReason{}, "CostStat": service.CostStat{}, "ForecastCheck": service.ForecastCheck{},
		"QuotaUsage": service.QuotaUsage{}, "TenantsInfo": service.TenantsInfo{}, "TenantsFileStatus": service.TenantsFileStatus{}, "TenantInfo": service.TenantInfo{},
		"ModelVersion": service.ModelVersion{}, "IdleForecast": service.IdleForecast{}, "IdleGPU": service.IdleGPU{},
		"IdleWindow": service.IdleWindow{}, "IdleCount": service.IdleCount{}, "IdleJob": service.IdleJob{}, "Health": struct {
			Status  string `json:"status"`
			Version string `json:"version"`
		}{}, "Ready": struct {
			Status string        `json:"status"`
			Checks []checkResult `json:"checks"`
		}{},
	}
	for name, v := range types {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(props)
		if want := jsonFields(reflect.TypeOf(v)); !slices.Equal(props, want) {
			t.Errorf("schema %s has %v, the Go type %T has %v", name, props, v, want)
		}
	}
	for name := range doc.Components.Schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s is checked against no Go type", name)
		}
	}
	refs := regexp.MustCompile(`"\$ref":\s*"#/components/(schemas|responses)/([A-Za-z0-9]+)"`)
	var raw struct {
		Components struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"components"`
	}
	_ = json.Unmarshal(OpenAPI(), &raw)
	for _, m := range refs.FindAllStringSubmatch(string(OpenAPI()), -1) {
		_, okS := doc.Components.Schemas[m[2]]
		_, okR := raw.Components.Responses[m[2]]
		if m[1] == "schemas" && !okS || m[1] == "responses" && !okR {
			t.Errorf("$ref %s/%s does not resolve", m[1], m[2])
		}
	}
}

// jsonFields lists the JSON names of a struct's fields, embedded ones
// flattened, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
