package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestLoansOutliveTheStore(t *testing.T) {
	ctx := context.Background()
	s, path := openFile(t)
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, l := range []Loan{
		{Node: "inf-1", Pool: "inference", State: "lent", Since: t0, Spans: []LoanSpan{{From: t0}}},
		{Node: "inf-0", Pool: "inference", State: "lent", Since: t0, Spans: []LoanSpan{{From: t0}}},
		{Node: "inf-2", Pool: "inference", State: "lent", Since: t0, Spans: []LoanSpan{{From: t0}}},
		{Node: "inf-1", Pool: "inference", State: "returning", Since: t0.Add(time.Hour), Spans: []LoanSpan{{From: t0}}},
		{Node: "inf-2", Pool: "inference", State: "serving", Since: t0.Add(time.Hour), Spans: []LoanSpan{{From: t0.Add(-time.Hour), Until: t0.Add(-time.Minute)}, {From: t0, Until: t0.Add(time.Hour)}}},
	} {
		if err := s.PutLoan(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutLoan(ctx, Loan{Node: "inf-3", Pool: "inference", State: "parked", Since: t0}); err == nil {
		t.Error("a loan in state parked was stored")
	}
	if err := s.DeleteLoan(ctx, "inf-0"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLoan(ctx, "never-lent"); err != nil {
		t.Fatalf("ending a loan that is not there: %v", err)
	}
	s = reopen(t, s, path)
	got, err := s.Loans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]Loan{{Node: "inf-1", Pool: "inference", State: "returning", Since: t0.Add(time.Hour), Spans: []LoanSpan{{From: t0}}},
		{Node: "inf-2", Pool: "inference", State: "serving", Since: t0.Add(time.Hour), Spans: []LoanSpan{{From: t0.Add(-time.Hour), Until: t0.Add(-time.Minute)}, {From: t0, Until: t0.Add(time.Hour)}}}}); fmt.Sprint(got) != want {
		t.Errorf("loans %v, want %v", got, want)
	}
}
