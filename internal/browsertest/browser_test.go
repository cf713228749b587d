package browsertest_test

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prescient-sched/prescient/internal/browsertest"
)

// fatalTB is a test that records its fatal failure instead of failing: it
// lets these tests check what browsertest reports. Everything else goes to
// the real test.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }

func (f *fatalTB) Fatal(args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprint(args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) message() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

// run runs fn as the fake test and returns its fatal message ("" if none).
func (f *fatalTB) run(fn func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	return f.message()
}

func TestMissingChromiumFailsWithTheFix(t *testing.T) {
	t.Setenv(browsertest.EnvChromium, "/nonexistent/chromium")
	fake := &fatalTB{TB: t}
	msg := fake.run(func() { browsertest.Start(fake) })
	if !strings.Contains(msg, "/nonexistent/chromium") || !strings.Contains(msg, "scripts/ensure-chromium.sh") {
		t.Fatalf("Start without a browser reported %q; want the path it looked at and scripts/ensure-chromium.sh", msg)
	}
}

const page = `<!doctype html><html><body>
<p id="greeting">waiting</p>
<script>setTimeout(() => { document.getElementById('greeting').textContent = 'hello'; console.log('greeted'); }, 300);</script>
</body></html>`

func servePage(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestBrowserWaitsForThePage(t *testing.T) {
	b := browsertest.Start(t)
	b.Do("open the page", chromedp.Navigate(servePage(t)))
	got := browsertest.Poll[string](b, "wait for the greeting",
		`document.getElementById('greeting').textContent === 'hello' ? 'hello' : ''`, 10*time.Second)
	if got != "hello" {
		t.Fatalf("Poll = %q, want hello", got)
	}
	if n := browsertest.Eval[int](b, "count paragraphs", `document.querySelectorAll('p').length`); n != 1 {
		t.Fatalf("Eval counted %d paragraphs, want 1", n)
	}
}

func TestFailedStepLeavesAScreenshotAndThePage(t *testing.T) {
	shots := t.TempDir()
	t.Setenv(browsertest.EnvScreenshots, shots)
	fake := &fatalTB{TB: t}
	msg := fake.run(func() {
		b := browsertest.Start(fake)
		b.Do("open the page", chromedp.Navigate(servePage(t)))
		browsertest.Poll[string](b, "wait for the greeting", `document.getElementById('greeting').textContent === 'hello' ? 'ok' : ''`, 10*time.Second)
		browsertest.Poll[string](b, "wait for something that never shows", `document.getElementById('nothing') ? 'yes' : ''`, time.Second)
	})
	for _, want := range []string{"wait for something that never shows", "page text:", "hello", "browser console:", "greeted"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure report lacks %q:\n%s", want, msg)
		}
	}
	m := regexp.MustCompile(`screenshot: (\S+\.png)`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("failure report names no screenshot:\n%s", msg)
	}
	png, err := os.ReadFile(m[1])
	if err != nil || len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes, %v)", m[1], len(png), err)
	}
	if !strings.HasPrefix(m[1], shots) {
		t.Errorf("screenshot %s is not in %s=%s", m[1], browsertest.EnvScreenshots, shots)
	}
}

func TestShootViewKeepsAWindowSizedPNG(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "views")
	t.Setenv(browsertest.EnvViews, dir)
	b := browsertest.Start(t)
	b.Do("open the page", chromedp.Navigate(servePage(t)))
	path := b.ShootView("greeting")
	if want := filepath.Join(dir, "greeting.png"); path != want {
		t.Errorf("ShootView wrote %s, want %s", path, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != browsertest.WindowWidth || cfg.Height != browsertest.WindowHeight {
		t.Fatalf("%s: %dx%d (%v); want a PNG of %dx%d", path, cfg.Width, cfg.Height, err, browsertest.WindowWidth, browsertest.WindowHeight)
	}
}

func TestViewsDirDefaultsToTheTemporaryFolder(t *testing.T) {
	t.Setenv(browsertest.EnvViews, "")
	if got, want := browsertest.ViewsDir(), filepath.Join(os.TempDir(), browsertest.ViewsDirName); got != want {
		t.Errorf("ViewsDir() = %s, want %s", got, want)
	}
}
