package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// JobInput is a job as a person types it into the dashboard's submit form.
type JobInput struct {
	Name string
	// Tier is a tier's name; "" leaves the form's default (standard).
	Tier string
	GPUs int
	// GPUMilli is the share of each GPU in milli-GPUs; 0 means whole GPUs.
	GPUMilli int
	// Labels are typed as "k=v, k2=v2": no commas in keys or values.
	Labels map[string]string
	// Command is the argv the agent runs; empty for backends that need none.
	Command        []string
	Deadline       time.Time // zero for none; the form takes minutes, in UTC
	Checkpointable bool
}

// JobSeen is what the dashboard's job list showed for the submitted job.
type JobSeen struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	State     string `json:"state"`
	Placement string `json:"placement"`
	Forecast  string `json:"forecast"`
	// UtilPoints is the number of data points the utilization chart drew.
	UtilPoints int `json:"util_points"`
}

// ScenarioTimeout bounds each wait of the scenario for the page to show
// something: the page refreshes every five seconds, and a control plane may
// take a planning tick before a job has a forecast.
const ScenarioTimeout = 60 * time.Second

// DashboardScenario is what a person does first with the dashboard at
// baseURL: log in with token, submit job through the form, and wait until
// the page shows the job in the job list with its forecast, and the
// utilization chart with data points. A step that fails takes a screenshot
// (into t.TempDir(), or $PRESCIENT_BROWSERTEST_SCREENSHOTS) and fails the
// test with what the page showed. It returns what the page showed of the job.
func DashboardScenario(t testing.TB, baseURL, token string, job JobInput) JobSeen {
	t.Helper()
	b := Start(t)
	Open(b, baseURL)
	Login(b, token)
	id := SubmitJob(b, job)
	seen := WaitForJob(b, id, job.Name)
	seen.UtilPoints = WaitForUtilization(b)
	t.Logf("dashboard showed job %s (%s) in state %s, placement %q, forecast %q; utilization chart with %d points",
		seen.ID, seen.Name, seen.State, seen.Placement, seen.Forecast, seen.UtilPoints)
	return seen
}

// Open opens the dashboard at baseURL and waits for its login form (a
// fresh browser has no token in its session).
func Open(b *Browser, baseURL string) {
	b.t.Helper()
	b.Do("open the dashboard at "+baseURL,
		chromedp.Navigate(baseURL),
		chromedp.WaitVisible(chromedp.ID("login-form")))
}

// Login enters token in the open login form and waits for the dashboard to
// replace the form and finish its first refresh (it says when it was
// updated). A refused token fails the test with the message the page
// showed.
func Login(b *Browser, token string) {
	b.t.Helper()
	if outcome := tryLogin(b, token); outcome != "ok" {
		b.Fail("log in", fmt.Errorf("the dashboard did not accept the token: %s", strings.TrimPrefix(outcome, "refused: ")))
	}
}

// LoginRefused enters token in the open login form and returns the message
// the form shows when the API refuses it (or cannot be reached). The test
// fails if the dashboard accepts the token.
func LoginRefused(b *Browser, token string) string {
	b.t.Helper()
	outcome := tryLogin(b, token)
	if outcome == "ok" {
		b.Fail("log in with a token the API must refuse", fmt.Errorf("the dashboard accepted it"))
	}
	return strings.TrimPrefix(outcome, "refused: ")
}

// tryLogin answers "ok" or "refused: <the page's message>".
func tryLogin(b *Browser, token string) string {
	b.t.Helper()
	b.Do("enter the token",
		SetField("token", token),
		chromedp.Click(chromedp.ID("login-submit")))
	return Poll[string](b, "wait for the dashboard or a login error", `(() => {
		if (!document.getElementById('app').hidden) return document.getElementById('refreshed').textContent ? 'ok' : '';
		const e = document.getElementById('login-error');
		return e.hidden ? '' : 'refused: ' + e.textContent;
	})()`, ScenarioTimeout)
}

// SubmitJob fills in the submit form, submits it and returns the job's ID
// as the page reports it. A refused submission fails the test with the
// page's message.
func SubmitJob(b *Browser, job JobInput) string {
	b.t.Helper()
	outcome := trySubmit(b, job)
	id, ok := strings.CutPrefix(outcome, "ok:")
	if !ok {
		b.Fail("submit the job", fmt.Errorf("the page says: %s", strings.TrimPrefix(outcome, "error:")))
	}
	return id
}

// SubmitRefused fills in and submits the form and returns the message the
// page shows when the API refuses the job. The test fails if it is accepted.
func SubmitRefused(b *Browser, job JobInput) string {
	b.t.Helper()
	outcome := trySubmit(b, job)
	if strings.HasPrefix(outcome, "ok:") {
		b.Fail("submit a job the API must refuse", fmt.Errorf("the page says it was accepted as %s", strings.TrimPrefix(outcome, "ok:")))
	}
	return strings.TrimPrefix(outcome, "error:")
}

// trySubmit answers "ok:<job ID>" or "error:<the page's message>".
func trySubmit(b *Browser, job JobInput) string {
	b.t.Helper()
	b.Do("find the submit form", chromedp.WaitVisible(chromedp.ID("submit-form")))
	tier, milli := job.Tier, job.GPUMilli
	if tier == "" {
		tier = "standard"
	}
	if milli == 0 {
		milli = 1000
	}
	var command, deadline string
	if len(job.Command) > 0 {
		argv, err := json.Marshal(job.Command)
		if err != nil {
			b.t.Fatalf("browsertest: command %q: %v", job.Command, err)
		}
		command = string(argv)
	}
	if !job.Deadline.IsZero() {
		deadline = job.Deadline.UTC().Format("2006-01-02T15:04")
	}
	// Every field is set, so that a second submission carries nothing of the first.
	steps := []chromedp.Action[chromedp.Void]{
		SetField("submit-name", job.Name),
		SetField("submit-tier", tier),
		SetField("submit-gpus", strconv.Itoa(job.GPUs)),
		SetField("submit-gpu-milli", strconv.Itoa(milli)),
		SetField("submit-labels", formatLabels(job.Labels)),
		SetField("submit-command", command),
		SetField("submit-deadline", deadline),
	}
	// A click toggles the box: click only when it is not as wanted.
	checked := Eval[bool](b, "read the checkpointable box", `document.getElementById('submit-checkpointable').checked`)
	if checked != job.Checkpointable {
		steps = append(steps, chromedp.Click(chromedp.ID("submit-checkpointable")))
	}
	steps = append(steps, chromedp.Click(chromedp.ID("submit-button")))
	b.Do("fill in and submit the job form", steps...)

	return Poll[string](b, "wait for the submission's answer", `(() => {
		const r = document.getElementById('submit-result');
		if (r.hidden) return '';
		if (r.dataset.jobId) return 'ok:' + r.dataset.jobId;
		return r.classList.contains('error') ? 'error:' + r.textContent : '';
	})()`, ScenarioTimeout)
}

// WaitForJob waits until the job list shows job id with a forecast, and
// checks that it shows the name the job was submitted with.
func WaitForJob(b *Browser, id, name string) JobSeen {
	b.t.Helper()
	quoted, _ := json.Marshal(id) // a JSON string is a JavaScript string literal
	seen := Poll[JobSeen](b, "wait for job "+id+" and its forecast in the job list", `(() => {
		const row = document.querySelector('#jobs tr[data-job-id="' + CSS.escape(`+string(quoted)+`) + '"]');
		if (!row) return null;
		const forecast = row.querySelector('.forecast').textContent;
		if (!forecast.includes('P50')) return null;
		return { id: row.dataset.jobId, name: row.querySelector('.job-name').textContent, state: row.dataset.state,
			placement: row.querySelector('.placement').textContent, forecast };
	})()`, ScenarioTimeout)
	if seen.Name != name {
		b.Fail("check the job's row", fmt.Errorf("job %s shows the name %q, want %q", id, seen.Name, name))
	}
	return seen
}

// WaitForUtilization waits until the utilization chart has drawn data points
// and returns how many.
func WaitForUtilization(b *Browser) int {
	b.t.Helper()
	return Poll[int](b, "wait for the utilization chart's data points", `(() => {
		const c = document.getElementById('util-chart');
		const n = c.querySelectorAll('svg circle.point').length;
		return n > 0 && Number(c.dataset.points) === n ? n : 0;
	})()`, ScenarioTimeout)
}

func formatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ", ")
}

// SetField sets the value of the form field with that id as typing would
// (it fires input and change) and checks that the field took it: a number
// field refuses what is not a number, a select what is not an option.
func SetField(id, value string) chromedp.Action[chromedp.Void] {
	idJS, _ := json.Marshal(id)
	valueJS, _ := json.Marshal(value)
	expr := `(() => {
		const e = document.getElementById(` + string(idJS) + `);
		if (!e) return 'no element #' + ` + string(idJS) + `;
		e.value = ` + string(valueJS) + `;
		e.dispatchEvent(new Event('input', { bubbles: true }));
		e.dispatchEvent(new Event('change', { bubbles: true }));
		return e.value === ` + string(valueJS) + ` ? '' : 'the field holds ' + JSON.stringify(e.value);
	})()`
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		problem, err := chromedp.Evaluate[string](expr)(ctx, t)
		if err != nil {
			return chromedp.Void{}, fmt.Errorf("setting #%s to %q: %w", id, value, err)
		}
		if problem != "" {
			return chromedp.Void{}, fmt.Errorf("setting #%s to %q: %s", id, value, problem)
		}
		return chromedp.Void{}, nil
	}
}
