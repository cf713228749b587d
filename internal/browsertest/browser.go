package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names the browser binary when it is not Debian's
// /usr/bin/chromium (the same variable scripts/ensure-chromium.sh reads).
const EnvChromium = "CHROMIUM"

// DefaultChromium is where Debian's chromium package puts the browser.
const DefaultChromium = "/usr/bin/chromium"

// EnvScreenshots names a folder that keeps the screenshots of failed browser
// steps after the test ends (by default they go to the test's t.TempDir(),
// which the test removes).
const EnvScreenshots = "PRESCIENT_BROWSERTEST_SCREENSHOTS"

// EnvViews names the folder where tests keep the screenshot of each view
// they check (Browser.ShootView). Unlike a failure's screenshot it is
// kept when the test passes: it is a test artefact, to look at or to
// attach to a review. By default it is ViewsDirName in the system's
// temporary folder ($TMPDIR, else /tmp).
const EnvViews = "PRESCIENT_SCREENSHOTS"

// ViewsDirName is the default folder of the view screenshots, under
// os.TempDir().
const ViewsDirName = "prescient-dashboard-screenshots"

// WindowWidth and WindowHeight are the browser window's size in CSS
// pixels, and so the size of every view screenshot.
const (
	WindowWidth  = 1400
	WindowHeight = 1000
)

// StepTimeout bounds one step of a browser test (starting the browser,
// waiting for the page to show something). Two shared cores start Chromium
// in a few seconds; a minute is generous without hanging forever.
const StepTimeout = 60 * time.Second

// Browser is one headless Chromium with one tab, for one test.
type Browser struct {
	t   testing.TB
	tab context.Context

	mu      sync.Mutex
	console []string // what the page wrote to its console, newest last
	output  lockedBuffer
}

// Start starts a headless Chromium with a fresh profile and returns its tab.
// The browser stops when the test ends. A missing browser fails the test with
// the command that installs it: these tests exist to run in a real browser,
// and a skip would hide that they did not.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin := Path()
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("browsertest: Chromium is missing at %s (%v): run scripts/ensure-chromium.sh "+
			"(it installs Debian's chromium package; `make test` runs it), or set %s to the browser's path", bin, err, EnvChromium)
	}
	profile := t.TempDir() // registered before the browser's cleanup, so removed after the browser is gone
	// Chromium leaves a folder with its singleton socket in TMPDIR when it
	// is stopped rather than closed, as each test's browser is: one in the
	// test's own temporary folder goes with it.
	tmp := t.TempDir()
	b := &Browser{t: t}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		// The tests talk to servers on loopback; no proxy setting of the machine applies.
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(profile),
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.WindowSize(WindowWidth, WindowHeight),
		chromedp.CombinedOutput(&b.output),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	b.tab = tab

	// The first Run starts the browser; it must not carry a timeout (that
	// would stop the browser when it fires), so a watchdog bounds it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tab) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("browsertest: starting %s: %v\nbrowser output:\n%s", bin, err, b.output.String())
		}
		// The window's size need not be its page's: fix the viewport,
		// so that screenshots are WindowWidth x WindowHeight at scale 1.
		if err := b.run(chromedp.EmulateViewport(WindowWidth, WindowHeight)); err != nil {
			t.Fatalf("browsertest: setting the viewport to %dx%d: %v", WindowWidth, WindowHeight, err)
		}
	case <-time.After(StepTimeout):
		cancelTab()
		t.Fatalf("browsertest: %s did not start within %s\nbrowser output:\n%s", bin, StepTimeout, b.output.String())
	}
	go b.recordConsole()
	return b
}

// Path returns the browser binary the tests use: $CHROMIUM, else
// /usr/bin/chromium.
func Path() string {
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	return DefaultChromium
}

// Context returns the tab's context, for chromedp calls of the test's own.
// Derive a context with a timeout from it for each call; never cancel it.
func (b *Browser) Context() context.Context { return b.tab }

// recordConsole keeps what the page writes to its console, to show when a
// step fails.
func (b *Browser) recordConsole() {
	for m, err := range chromedp.Console(b.tab) {
		if err != nil {
			return
		}
		line := fmt.Sprintf("%s %s", m.Type, m.Text)
		if m.URL != "" {
			line += fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
		}
		b.mu.Lock()
		b.console = append(b.console, line)
		if len(b.console) > 50 {
			b.console = b.console[len(b.console)-50:]
		}
		b.mu.Unlock()
	}
}

func (b *Browser) run(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.tab, StepTimeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// Do runs steps in the tab within StepTimeout. When one fails it takes a
// screenshot and fails the test with what the page showed and logged.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, StepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.Fail(what, err)
	}
}

// Eval evaluates a JavaScript expression in the page and decodes its value.
func Eval[T any](b *Browser, what, expression string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, StepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.Fail(what, err)
	}
	return v
}

// Poll waits until a JavaScript expression is truthy (within timeout) and
// returns its value. Expressions that say why they are not yet true read
// best in a failure: see WaitFor.
func Poll[T any](b *Browser, what, expression string, timeout time.Duration) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.tab, timeout+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expression,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		b.Fail(what, err)
	}
	return v
}

// Fail fails the test after a step went wrong: it saves a screenshot and
// reports the page's visible text and its console.
func (b *Browser) Fail(what string, err error) {
	b.t.Helper()
	var report strings.Builder
	fmt.Fprintf(&report, "browsertest: %s: %v", what, err)
	if shot, serr := b.screenshot(what); serr != nil {
		fmt.Fprintf(&report, "\nscreenshot: none (%v)", serr)
	} else {
		fmt.Fprintf(&report, "\nscreenshot: %s", shot)
	}
	ctx, cancel := context.WithTimeout(b.tab, 5*time.Second)
	text, terr := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	cancel()
	if terr == nil {
		fmt.Fprintf(&report, "\npage text:\n%s", clip(text, 3000))
	}
	b.mu.Lock()
	if len(b.console) > 0 {
		fmt.Fprintf(&report, "\nbrowser console:\n%s", strings.Join(b.console, "\n"))
	}
	b.mu.Unlock()
	b.t.Fatal(report.String())
}

func (b *Browser) screenshot(what string) (string, error) {
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = b.t.TempDir()
	}
	name := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(b.t.Name()+"-"+what) + ".png"
	return b.savePNG(chromedp.FullScreenshot(100), dir, name) // quality 100 makes a PNG
}

// ViewsDir is where ShootView writes: $PRESCIENT_SCREENSHOTS, else
// prescient-dashboard-screenshots in the system's temporary folder.
func ViewsDir() string {
	if d := os.Getenv(EnvViews); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), ViewsDirName)
}

// ShootView saves what the window shows now (WindowWidth x WindowHeight) as
// name.png in ViewsDir, replacing the one of an earlier run, logs where,
// and returns the path. A screenshot that cannot be taken or written fails
// the test: it is one of the test's results.
func (b *Browser) ShootView(name string) string {
	b.t.Helper()
	path, err := b.savePNG(chromedp.CaptureScreenshot(), ViewsDir(), name+".png")
	if err != nil {
		b.Fail("take the screenshot "+name, err)
	}
	b.t.Logf("screenshot of the view: %s", path)
	return path
}

// savePNG takes a screenshot with shot and writes it as dir/name.
func (b *Browser) savePNG(shot chromedp.Action[[]byte], dir, name string) (string, error) {
	ctx, cancel := context.WithTimeout(b.tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the screenshots' folder: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "", fmt.Errorf("writing the screenshot: %w", err)
	}
	return path, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// lockedBuffer collects the browser's output, which arrives on another
// goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 64<<10 {
		return len(p), nil // enough to say why it failed
	}
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
