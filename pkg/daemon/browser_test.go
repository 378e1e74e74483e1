package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chromium finds Debian's headless-capable chromium, or skips the test.
// .ci/run installs it when it is missing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no chromium on PATH (apt-get install chromium; .ci/run installs it where it can)")
	return ""
}

// runChromium runs headless chromium on pageURL with args and returns its
// standard output.
func runChromium(t *testing.T, bin, pageURL string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + profile, "--window-size=1400,1000", "--virtual-time-budget=8000",
	}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), pageURL)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = nil
	require.NoError(t, cmd.Run(), "chromium %v", args)
	return stdout.String()
}

// TestRiverUIInABrowser opens the poison event's job page in River UI, in
// headless chromium, and finds the handler's error on it; the screenshot is
// written under the test's temporary folder (and copied to
// $HOOKINBOX_SCREENSHOT when set, which is how docs/ gets its picture).
func TestRiverUIInABrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a browser")
	}
	bin := chromium(t)
	b := observeSetup(t)
	require.Equal(t, http.StatusOK, b.deliver(t, "bank", secret, "ev_poison", "account.poison", "req-poison"))
	workerURL := b.startWorker(t)
	_, _, jobID, _ := b.row(t, "ev_poison")
	waitFor(t, "the poison job discarded", func() bool { return b.job(t, jobID).state == "discarded" })

	// Headless chromium sends a URL's credentials with the page but not
	// with the app's API calls, so the browser goes through a proxy that
	// signs in, as an ingress with single sign-on would. The 401 without
	// credentials is TestMetricsAndRiverUI's.
	target, err := url.Parse(workerURL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	signedIn := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.SetBasicAuth(uiUser, uiPassword)
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(signedIn.Close)
	u, err := url.Parse(fmt.Sprintf("%s/riverui/jobs/%d", signedIn.URL, jobID))
	require.NoError(t, err)

	dom := runChromium(t, bin, u.String(), "--dump-dom")
	require.Contains(t, dom, errPoison.Error(), "the job page shows the handler's error")
	require.Contains(t, dom, "ev_poison", "the job page shows the event's args")

	shot := filepath.Join(t.TempDir(), "riverui-poison-job.png")
	runChromium(t, bin, u.String(), "--hide-scrollbars", "--screenshot="+shot)
	info, err := os.Stat(shot)
	require.NoError(t, err)
	require.Positive(t, info.Size())
	t.Logf("screenshot: %s", shot)
	if out := os.Getenv("HOOKINBOX_SCREENSHOT"); out != "" {
		data, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, data, 0o644))
	}
}
