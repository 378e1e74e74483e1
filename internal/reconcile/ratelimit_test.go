package reconcile_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// clock is a test clock whose Sleep moves it on, so that waits of an hour
// take no time and every request's time is exact.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
	return nil
}

// limiter stands in front of a provider's fake: it records when each
// request came (on now) and answers the first ones with limits, in order,
// as the provider documents its rate limit; the others reach the fake.
type limiter struct {
	next   http.Handler
	now    func() time.Time
	limits []func(rw http.ResponseWriter, at time.Time)
	// last names the requests (from 0) whose answers, passed on, spend the
	// window's last request (X-RateLimit-Remaining 0), with its reset.
	last map[int]time.Time

	mu    sync.Mutex
	times []time.Time
}

func (l *limiter) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	at := l.now()
	l.mu.Lock()
	n := len(l.times)
	l.times = append(l.times, at)
	l.mu.Unlock()
	if n < len(l.limits) {
		l.limits[n](rw, at)
		return
	}
	if reset, ok := l.last[n]; ok {
		rw.Header().Set("X-RateLimit-Remaining", "0")
		rw.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	}
	l.next.ServeHTTP(rw, r)
}

// behind serves fake behind a limiter on now, and returns its URL.
func behind(t *testing.T, fake http.Handler, now func() time.Time, limits ...func(rw http.ResponseWriter, at time.Time)) (*limiter, string) {
	t.Helper()
	l := &limiter{next: fake, now: now, limits: limits}
	server := httptest.NewServer(l)
	t.Cleanup(server.Close)
	return l, server.URL
}

// calls returns the requests' times.
func (l *limiter) calls() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.times...)
}

// limit answers status with headers and body.
func limit(status int, body string, headers ...string) func(rw http.ResponseWriter, at time.Time) {
	return func(rw http.ResponseWriter, _ time.Time) {
		for i := 0; i+1 < len(headers); i += 2 {
			rw.Header().Set(headers[i], headers[i+1])
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		_, _ = rw.Write([]byte(body))
	}
}

// githubPrimary answers as GitHub does past its primary limit: 403 (or
// 429), no request left, the window's reset in unix seconds, no
// Retry-After.
func githubPrimary(status int, reset func(at time.Time) time.Time) func(rw http.ResponseWriter, at time.Time) {
	return func(rw http.ResponseWriter, at time.Time) {
		h := rw.Header()
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Resource", "core")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset(at).Unix(), 10))
		rw.WriteHeader(status)
		_, _ = rw.Write([]byte(`{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`))
	}
}

const githubSecondary = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`

// githubBehindLimiter is a GitHub hook with one delivery, behind limits,
// and its redeliverer listing pageSize a page (0: the default) on c (nil:
// the real clock and sleep).
func githubBehindLimiter(t *testing.T, c *clock, pageSize int, limits ...func(rw http.ResponseWriter, at time.Time)) (*reconcile.GitHub, *limiter, *providerapi.GitHub) {
	t.Helper()
	fake := providerapi.NewGitHub("/repos/octo/hello/hooks/1", "http://127.0.0.1:1/unused", githubSecret, providerapi.Bearer(githubToken))
	fake.Add("g1", time.Now().Add(-time.Minute), false, http.StatusOK)
	retry := reconcile.RetryConfig{}
	now := time.Now
	if c != nil {
		retry.Sleep, retry.Now, now = c.Sleep, c.Now, c.Now
	}
	l, url := behind(t, fake, now, limits...)
	retry.HTTPClient = http.DefaultClient
	g, err := reconcile.NewGitHub(&reconcile.GitHubConfig{
		Hook: "repos/octo/hello/hooks/1", Token: githubToken, BaseURL: url, PageSize: pageSize, Retry: retry,
	})
	require.NoError(t, err)
	return g, l, fake
}

// known says the inbox holds every delivery.
func known(context.Context, string) (bool, error) { return true, nil }

func TestGitHubRateLimit(t *testing.T) {
	t.Parallel()

	t.Run("PrimaryLimitIsWaitedOutUntilTheReset", func(t *testing.T) {
		t.Parallel()
		// The real clock and the real sleep: GitHub's reset, 2 s ahead in
		// whole unix seconds, is the earliest the next call may come.
		var reset time.Time
		g, l, _ := githubBehindLimiter(t, nil, 0, githubPrimary(http.StatusForbidden, func(at time.Time) time.Time {
			reset = time.Unix(at.Unix()+2, 0)
			return reset
		}))
		res, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, known, false)
		require.NoError(t, err)
		require.Equal(t, 1, res.Fetched)
		calls := l.calls()
		require.Len(t, calls, 2)
		t.Logf("403 at %s, reset %s, next call at %s", calls[0].Format("15:04:05.000"), reset.Format("15:04:05.000"), calls[1].Format("15:04:05.000"))
		require.False(t, calls[1].Before(reset), "called again %s before the reset", reset.Sub(calls[1]))
		require.Less(t, calls[1].Sub(reset), time.Second)
	})

	t.Run("AResetAnHourAwayEndsTheRunWithoutCalling", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		g, l, _ := githubBehindLimiter(t, c, 0, githubPrimary(http.StatusTooManyRequests, func(at time.Time) time.Time { return at.Add(time.Hour) }))
		_, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, known, false)
		var limited *reconcile.RateLimitedError
		require.ErrorAs(t, err, &limited)
		require.Equal(t, c.Now().Add(time.Hour), limited.Until)
		require.Len(t, l.calls(), 1, "no call before the reset")
	})

	t.Run("SecondaryLimitWaitsItsRetryAfter", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		g, l, _ := githubBehindLimiter(t, c, 0, limit(http.StatusForbidden, githubSecondary, "Retry-After", "30", "X-RateLimit-Remaining", "4000"))
		_, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, known, false)
		require.NoError(t, err)
		calls := l.calls()
		require.Len(t, calls, 2)
		require.Equal(t, 30*time.Second, calls[1].Sub(calls[0]))
	})

	t.Run("SecondaryLimitNamingNoTimeWaitsAMinuteThenReschedules", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		g, l, _ := githubBehindLimiter(t, c, 0,
			limit(http.StatusForbidden, githubSecondary), limit(http.StatusTooManyRequests, githubSecondary))
		_, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, known, false)
		var limited *reconcile.RateLimitedError
		require.ErrorAs(t, err, &limited)
		calls := l.calls()
		require.Len(t, calls, 2)
		require.Equal(t, time.Minute, calls[1].Sub(calls[0]))
		require.Equal(t, calls[1].Add(2*time.Minute), limited.Until, "a minute, doubled")
	})

	t.Run("NoRequestLeftOnASuccessKeepsTheNextCallUntilTheReset", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		reset := c.Now().Add(20 * time.Second)
		g, l, fake := githubBehindLimiter(t, c, 1)
		fake.Add("g2", time.Now().Add(-30*time.Second), false, http.StatusOK)
		// The first page's answer spends the window's last request.
		l.last = map[int]time.Time{0: reset}
		_, err := g.Reconcile(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, known, false)
		require.NoError(t, err)
		calls := l.calls()
		require.Len(t, calls, 2)
		require.Equal(t, reset, calls[1])
	})

	t.Run("AReschedulingRunSnoozesItsJob", func(t *testing.T) {
		t.Parallel()
		in := setupInbox(t)
		c := newClock()
		g, l, _ := githubBehindLimiter(t, c, 0, githubPrimary(http.StatusForbidden, func(at time.Time) time.Time { return at.Add(30 * time.Minute) }))
		core, logs := observer.New(zap.InfoLevel)
		reg := prometheus.NewRegistry()
		worker := reconcile.NewWorker(in.db.Pool, &reconcile.WorkerConfig{
			Sources: []*reconcile.Source{{Name: "gh", Provider: "github", GitHub: g, Interval: 15 * time.Minute, Lookback: time.Hour}},
			Logger:  zap.New(core), Now: c.Now, Metrics: metrics.NewReconcile(reg),
		})
		tw := rivertest.NewWorker(t, riverpgxv5.New(in.db.Pool), &river.Config{}, worker)
		ctx := context.Background()
		tx, err := in.db.Pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		before := time.Now()
		res, err := tw.Work(ctx, t, tx, reconcile.Args{Source: "gh"}, nil)
		require.NoError(t, err)
		require.Equal(t, river.EventKindJobSnoozed, res.EventKind)
		require.Equal(t, 0, res.Job.Attempt, "a snooze spends no attempt")
		require.WithinDuration(t, before.Add(30*time.Minute), res.Job.ScheduledAt, 5*time.Second)
		require.Len(t, l.calls(), 1)
		entries := logs.FilterMessageSnippet("rate limited").All()
		require.Len(t, entries, 1)
		require.Equal(t, c.Now().Add(30*time.Minute), entries[0].ContextMap()["retry_at"])
		_, ok, err := reconcile.NewWatermarks(in.db.Pool).Get(ctx, "gh")
		require.NoError(t, err)
		require.False(t, ok, "the watermark stays")
		require.InDelta(t, 1, value(t, reg, "hookinbox_reconcile_runs_total", "result", "rate_limited"), 0, "rescheduled, not failed")
	})
}

// fetcherBehind returns provider's fetcher (stripe, paddle or square) of
// an empty account behind limits, on c, retrying maxRetries times.
func fetcherBehind(t *testing.T, name string, c *clock, maxRetries int, limits ...func(rw http.ResponseWriter, at time.Time)) (reconcile.Fetcher, *limiter) {
	t.Helper()
	parser, err := reconcile.Parser(name, &provider.Config{Secrets: []string{"secret"}, URL: squareHookURL})
	require.NoError(t, err)
	retry := reconcile.RetryConfig{MaxRetries: maxRetries, Backoff: time.Second, Sleep: c.Sleep, Now: c.Now, HTTPClient: http.DefaultClient}
	var f reconcile.Fetcher
	var l *limiter
	var url string
	switch name {
	case "stripe":
		l, url = behind(t, &providerapi.Stripe{Key: testKey}, c.Now, limits...)
		f, err = reconcile.NewStripe(&reconcile.StripeConfig{APIKey: testKey, BaseURL: url, Parser: parser,
			MaxRetries: maxRetries, Backoff: time.Second, Sleep: c.Sleep, Now: c.Now})
	case "paddle":
		l, url = behind(t, &providerapi.Paddle{Key: paddleKey}, c.Now, limits...)
		f, err = reconcile.NewPaddle(&reconcile.PaddleConfig{APIKey: paddleKey, BaseURL: url, Parser: parser, Retry: retry})
	case "square":
		l, url = behind(t, &providerapi.Square{Token: squareToken}, c.Now, limits...)
		f, err = reconcile.NewSquare(&reconcile.SquareConfig{AccessToken: squareToken, BaseURL: url, Parser: parser, Retry: retry, Now: c.Now})
	}
	require.NoError(t, err)
	return f, l
}

// fetch runs f from an hour ago.
func fetch(f reconcile.Fetcher) error {
	return f.Fetch(context.Background(), reconcile.Window{Since: time.Now().Add(-time.Hour)}, func([]reconcile.Fetched) error { return nil })
}

// gaps returns the time between each call and the next.
func gaps(calls []time.Time) []time.Duration {
	d := make([]time.Duration, 0, len(calls))
	for i := 1; i < len(calls); i++ {
		d = append(d, calls[i].Sub(calls[i-1]))
	}
	return d
}

const (
	stripeLimited = `{"error":{"message":"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.","type":"invalid_request_error","code":"rate_limit"}}`
	paddleLimited = `{"error":{"type":"api_error","code":"too_many_requests","detail":"IP address exceeded the allowed rate limit. Retry after the number of seconds in the Retry-After header.","documentation_url":"https://developer.paddle.com/errors/shared/too_many_requests"},"meta":{"request_id":"req_1"}}`
	squareLimited = `{"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED","detail":"This request was rate-limited. Please retry later."}]}`
)

func TestFetcherRateLimit(t *testing.T) {
	t.Parallel()

	// Stripe and Paddle answer 429 with Retry-After (seconds): the next
	// call comes then; one more than a minute away, or past the retries,
	// ends the run for a reschedule instead of a call before it.
	for _, p := range []struct{ name, body string }{{"stripe", stripeLimited}, {"paddle", paddleLimited}} {
		t.Run(p.name+"/RetryAfterIsWaited", func(t *testing.T) {
			t.Parallel()
			c := newClock()
			f, l := fetcherBehind(t, p.name, c, 5, limit(http.StatusTooManyRequests, p.body, "Retry-After", "7"))
			require.NoError(t, fetch(f))
			require.Equal(t, []time.Duration{7 * time.Second}, gaps(l.calls()))
		})

		t.Run(p.name+"/ARetryAfterPastAMinuteReschedules", func(t *testing.T) {
			t.Parallel()
			c := newClock()
			start := c.Now()
			f, l := fetcherBehind(t, p.name, c, 5, limit(http.StatusTooManyRequests, p.body, "Retry-After", "120"))
			var limited *reconcile.RateLimitedError
			require.ErrorAs(t, fetch(f), &limited)
			require.Equal(t, start.Add(120*time.Second), limited.Until)
			require.Len(t, l.calls(), 1, "no call before the Retry-After")
		})

		t.Run(p.name+"/LimitsPastTheRetriesReschedule", func(t *testing.T) {
			t.Parallel()
			c := newClock()
			lim := limit(http.StatusTooManyRequests, p.body, "Retry-After", "3")
			f, l := fetcherBehind(t, p.name, c, 2, lim, lim, lim)
			var limited *reconcile.RateLimitedError
			require.ErrorAs(t, fetch(f), &limited)
			calls := l.calls()
			require.Equal(t, []time.Duration{3 * time.Second, 3 * time.Second}, gaps(calls))
			require.Equal(t, calls[2].Add(3*time.Second), limited.Until)
		})
	}

	// Square documents a 429 RATE_LIMITED and no header: a jittered
	// doubling backoff, then a reschedule after the last wait.
	t.Run("square/BacksOffThenReschedules", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		lim := limit(http.StatusTooManyRequests, squareLimited)
		f, l := fetcherBehind(t, "square", c, 2, lim, lim, lim)
		var limited *reconcile.RateLimitedError
		require.ErrorAs(t, fetch(f), &limited)
		calls := l.calls()
		g := gaps(calls)
		require.Len(t, g, 2)
		require.GreaterOrEqual(t, g[0], 500*time.Millisecond)
		require.LessOrEqual(t, g[0], time.Second)
		require.GreaterOrEqual(t, g[1], time.Second)
		require.LessOrEqual(t, g[1], 2*time.Second)
		require.GreaterOrEqual(t, limited.Until.Sub(calls[2]), 2*time.Second)
	})

	t.Run("square/ALimitThenSuccessFinishes", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		f, l := fetcherBehind(t, "square", c, 5, limit(http.StatusTooManyRequests, squareLimited))
		require.NoError(t, fetch(f))
		require.Len(t, l.calls(), 2)
	})
}
