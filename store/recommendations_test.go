package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestRecommendationsRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: t0.Add(time.Hour)}
	s, _ := openTest(t, WithClock(c.Now))
	mustSubmit(t, s, testJob("j1").Obj())
	recs := []Recommendation{
		{JobID: "j1", Kind: "preempt", Reason: "production job p7 waits; j1 checkpointed 2 min ago",
			Details: json.RawMessage(`{"victim":"j1","checkpoint_by":"2026-03-01T10:05:00Z"}`)},
		{Time: t0.Add(30 * time.Minute), Kind: "power_cap", Reason: "rack r3 idles at 40%", Status: RecommendationDismissed},
		{Time: t0.Add(2 * time.Hour), Kind: "place", Reason: "one NVLink domain is free", Status: RecommendationApplied},
	}
	for i := range recs {
		id, err := s.AddRecommendation(ctx, recs[i])
		if err != nil {
			t.Fatal(err)
		}
		recs[i].ID = id
	}
	recs[0].Time, recs[0].Status = c.Now().UTC(), RecommendationOpen
	got, err := s.ListRecommendations(ctx, t0.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Recommendation{recs[0], recs[2]}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListRecommendations(since 1h) =\n%+v\nwant\n%+v", got, want)
	}
	got, err = s.ListRecommendations(ctx, time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Recommendation{recs[1]}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListRecommendations(all, limit 1) = %+v, want %+v", got, want)
	}
}

func TestAddRecommendationRejects(t *testing.T) {
	tests := []struct {
		name string
		rec  Recommendation
		is   error
	}{
		{"one about a job that is not stored", Recommendation{JobID: "nope", Kind: "preempt", Reason: "r"}, ErrNotFound},
		{"one without a kind", Recommendation{Reason: "r"}, nil},
		{"one without a reason", Recommendation{Kind: "place"}, nil},
		{"details that are not JSON", Recommendation{Kind: "place", Reason: "r", Details: json.RawMessage("{")}, nil},
		{"an unknown status", Recommendation{Kind: "place", Reason: "r", Status: "maybe"}, nil},
	}
	s, _ := openTest(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.AddRecommendation(context.Background(), tt.rec)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("AddRecommendation: %v, want an error wrapping %v", err, tt.is)
			}
		})
	}
	if n := count(t, s, "SELECT COUNT(*) FROM recommendations"); n != 0 {
		t.Errorf("%d recommendations stored, want none", n)
	}
}

func TestSetRecommendationStatus(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	id, err := s.AddRecommendation(ctx, Recommendation{Kind: "start", Reason: "fits"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRecommendationStatus(ctx, id, RecommendationDismissed); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListRecommendations(ctx, time.Time{}, 0)
	if err != nil || len(recs) != 1 || recs[0].Status != RecommendationDismissed {
		t.Errorf("after dismissal: %+v, %v", recs, err)
	}
	if err := s.SetRecommendationStatus(ctx, id+1, RecommendationApplied); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing recommendation: %v, want ErrNotFound", err)
	}
	if err := s.SetRecommendationStatus(ctx, id, "maybe"); err == nil {
		t.Error("invalid status: no error")
	}
}
