package datasets

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestReadPhillyRealTrace(t *testing.T) {
	res, err := ReadTrace("philly:"+sharedDataset(t, "philly", "philly_jobs.csv"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Jobs); got != 74167 {
		t.Fatalf("read %d jobs, want 74,167", got)
	}
	first, last := res.Jobs[0].SubmitTime, res.Jobs[len(res.Jobs)-1].SubmitTime
	if want := time.Date(2017, 9, 4, 10, 30, 41, 0, time.UTC); !first.Equal(want) {
		t.Errorf("first submit %v, want %v", first, want)
	}
	if want := time.Date(2017, 11, 30, 23, 52, 11, 0, time.UTC); !last.Equal(want) {
		t.Errorf("last submit %v, want %v", last, want)
	}
	assertSortedValid(t, res.Jobs)
	// The file's first data row (line 2): 2017-10-09 07:01:55,66.0,1,66.0,11cb48
	i := slices.IndexFunc(res.Jobs, func(j cluster.Job) bool { return j.ID == "philly-2" })
	if i < 0 {
		t.Fatal("no job philly-2")
	}
	j := res.Jobs[i]
	if !j.SubmitTime.Equal(time.Date(2017, 10, 9, 7, 1, 55, 0, time.UTC)) || j.Outcome.RunTime != 66*time.Second ||
		j.Spec.GPUs != 1 || j.Spec.Tenant != "11cb48" {
		t.Errorf("philly-2 = %+v", j)
	}
}

// assertSortedValid checks the contract every reader's result keeps.
func assertSortedValid(t *testing.T, jobs []cluster.Job) {
	t.Helper()
	for i := range jobs {
		if err := jobs[i].Validate(); err != nil {
			t.Fatalf("job %s does not validate: %v", jobs[i].ID, err)
		}
		if jobs[i].SubmitTime.Location() != time.UTC {
			t.Fatalf("job %s submit time is in %v, not UTC", jobs[i].ID, jobs[i].SubmitTime.Location())
		}
		if i == 0 {
			continue
		}
		a, b := jobs[i-1], jobs[i]
		if b.SubmitTime.Before(a.SubmitTime) || (b.SubmitTime.Equal(a.SubmitTime) && b.ID < a.ID) {
			t.Fatalf("jobs %s and %s are out of order", a.ID, b.ID)
		}
	}
}

func TestReadPhillyFixture(t *testing.T) {
	res, err := readPhilly(strings.NewReader(string(readTestdata(t, "philly_small.csv"))), "philly_small.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range res.Jobs {
		ids = append(ids, string(j.ID))
	}
	// Sorted by submit time; 06:13:03 is shared by lines 3 and 6 and the tie goes by ID.
	want := []string{"philly-4", "philly-3", "philly-6", "philly-5", "philly-2", "philly-7"}
	if !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
	j := res.Jobs[3] // line 5: 2017-10-09 06:13:36,2759.0,8,22072.0,6214e9
	wantJob := cluster.Job{
		ID: "philly-5", SubmitTime: time.Date(2017, 10, 9, 6, 13, 36, 0, time.UTC),
		Spec:  cluster.JobSpec{Tenant: "6214e9", Tier: cluster.DefaultTier, GPUs: 8, GPUMilli: cluster.MilliGPU},
		State: cluster.StateSucceeded, Attempts: 1, Outcome: cluster.Outcome{RunTime: 2759 * time.Second},
	}
	if !reflect.DeepEqual(j, wantJob) {
		t.Errorf("job\n got %+v\nwant %+v", j, wantJob)
	}
	if got := res.Jobs[2].Outcome.RunTime; got != 12500*time.Millisecond {
		t.Errorf("fractional duration read as %v, want 12.5s", got)
	}
}

const phillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n"
const phillyGoodRow = "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"

func TestPhillyBadRows(t *testing.T) {
	tests := []struct {
		name, row, field string
		cause            error
	}{
		{"a duration that is not a number names the field", "2017-10-09 07:01:55,abc,1,66.0,vc", "duration", errNotNumber},
		{"a negative duration is rejected", "2017-10-09 07:01:55,-5,1,66.0,vc", "duration", errNegative},
		{"a NaN duration is rejected", "2017-10-09 07:01:55,NaN,1,66.0,vc", "duration", errNotFinite},
		{"an infinite duration is rejected", "2017-10-09 07:01:55,+Inf,1,66.0,vc", "duration", errNotFinite},
		{"a duration of centuries is rejected", "2017-10-09 07:01:55,1e12,1,66.0,vc", "duration", errTooLarge},
		{"a negative GPU count is rejected", "2017-10-09 07:01:55,66,-1,66.0,vc", "num_gpus", errNegative},
		{"a GPU count over 100000 is rejected", "2017-10-09 07:01:55,66,100001,66.0,vc", "num_gpus", errTooLarge},
		{"a GPU count beyond int64 is too large", "2017-10-09 07:01:55,66,99999999999999999999,66.0,vc", "num_gpus", errTooLarge},
		{"a fractional GPU count is rejected", "2017-10-09 07:01:55,66,1.5,66.0,vc", "num_gpus", errNotInteger},
		{"an unreadable timestamp names the field", "yesterday,66,1,66.0,vc", "timestamp", nil},
		{"an empty virtual cluster is rejected", "2017-10-09 07:01:55,66,1,66.0,", "cluster", errEmpty},
		{"a short row is a row error", "2017-10-09 07:01:55,66,1,66.0", "", nil},
		{"a bare quote is a row error", `2017-10-09 07:01:55,6"6,1,66.0,vc`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := phillyHeader + phillyGoodRow + tt.row + "\n" + phillyGoodRow
			assertBadRow(t, readPhilly, data, tt.field, tt.cause, 2)
		})
	}
}

// assertBadRow reads data whose line 3 is bad: strictly it must fail there
// naming the field, leniently it must keep the want good rows and count one.
func assertBadRow(t *testing.T, read func(r io.Reader, file string, opt ReadOptions) (Result, error), data, field string, cause error, want int) {
	t.Helper()
	_, err := read(strings.NewReader(data), "f.csv", ReadOptions{})
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("strict read: error %v, want a *ParseError", err)
	}
	if pe.File != "f.csv" || pe.Line != 3 || pe.Field != field {
		t.Errorf("strict read: %q at %s:%d field %q, want f.csv:3 field %q", pe, pe.File, pe.Line, pe.Field, field)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Errorf("strict read: error %q does not wrap %q", err, cause)
	}
	res, err := read(strings.NewReader(data), "f.csv", ReadOptions{Lenient: true})
	if err != nil {
		t.Fatalf("lenient read: %v", err)
	}
	if len(res.Jobs) != want || res.Skipped != 1 || len(res.Errors) != 1 {
		t.Errorf("lenient read: %d jobs, %d skipped, %d errors; want %d, 1, 1", len(res.Jobs), res.Skipped, len(res.Errors), want)
	}
	if len(res.Errors) == 1 && res.Errors[0].Error() != pe.Error() {
		t.Errorf("lenient error %q differs from strict %q", res.Errors[0], pe)
	}
}

func TestPhillyHeaderErrorsNameTheColumn(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"a renamed column is missing", "timestamp,dur,num_gpus,gpu_time,cluster\n" + phillyGoodRow, `"duration" is missing`},
		{"a dropped column is missing", "timestamp,duration,num_gpus,cluster\n", `"gpu_time" is missing`},
		{"a repeated column is an error", "timestamp,duration,num_gpus,gpu_time,cluster,cluster\n", `"cluster" appears twice`},
		{"an empty file has no header", "", "no header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readPhilly(strings.NewReader(tt.data), "f.csv", ReadOptions{Lenient: true})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "f.csv:1:") {
				t.Errorf("error = %v, want f.csv:1: ... %s", err, tt.want)
			}
		})
	}
}

func TestPhillyHeaderOnlyIsAnEmptyTrace(t *testing.T) {
	res, err := readPhilly(strings.NewReader(phillyHeader), "f.csv", ReadOptions{})
	if err != nil || len(res.Jobs) != 0 {
		t.Errorf("got %d jobs, %v; want none and no error", len(res.Jobs), err)
	}
}

func TestPhillyExtraColumnsAndCRLFAreAccepted(t *testing.T) {
	data := "\ufefftimestamp,duration,num_gpus,gpu_time,cluster,note\r\n2017-10-09 07:01:55,66.0,1,66.0,vc,x\r\n"
	res, err := readPhilly(strings.NewReader(data), "f.csv", ReadOptions{})
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].Spec.Tenant != "vc" {
		t.Errorf("got %+v, %v", res.Jobs, err)
	}
}

func TestLenientReadKeepsOnlyMaxErrors(t *testing.T) {
	data := phillyHeader + strings.Repeat("2017-10-09 07:01:55,bad,1,1,vc\n", 5) + phillyGoodRow
	res, err := readPhilly(strings.NewReader(data), "f.csv", ReadOptions{Lenient: true, MaxErrors: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 1 || res.Skipped != 5 || len(res.Errors) != 2 {
		t.Errorf("%d jobs, %d skipped, %d errors; want 1, 5, 2", len(res.Jobs), res.Skipped, len(res.Errors))
	}
	res, _ = readPhilly(strings.NewReader(phillyHeader+strings.Repeat("x,1,1,1,vc\n", 30)), "f.csv", ReadOptions{Lenient: true})
	if len(res.Errors) != DefaultMaxErrors || res.Skipped != 30 {
		t.Errorf("default keeps %d errors of %d, want %d of 30", len(res.Errors), res.Skipped, DefaultMaxErrors)
	}
}
