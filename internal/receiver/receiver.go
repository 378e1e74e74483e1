// Package receiver is hookinbox's HTTP front door: POST /webhooks/:source
// verifies a delivery's signature on the raw bytes, claims its events in the
// inbox with their River jobs in one transaction, and answers 2xx only after
// that transaction committed. Echo stays inside this package.
package receiver

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookinbox/hookinbox/internal/fairshare"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/rejection"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// Source is one configured webhook endpoint.
type Source struct {
	// Name is the path segment and the inbox's source column.
	Name string
	// Provider is the provider's config name, stored with each row.
	Provider string
	// Verifier authenticates the source's deliveries (until WatchSecrets
	// replaces it, when SecretsFile is set).
	Verifier provider.Verifier
	// MaxBodyBytes is the body limit; larger bodies get 413. Required.
	MaxBodyBytes int64
	// AckTimeout bounds request-to-commit; past it the answer is 503. Required.
	AckTimeout time.Duration
	// AllowIPs, when non-empty, restricts deliveries to these networks;
	// other peers get 403 before anything is read.
	AllowIPs []netip.Prefix
	// SecretsFile, when set, is re-read by WatchSecrets, which swaps
	// Verifier for the one built from a changed file.
	SecretsFile *SecretsFile
}

// The defaults New applies to a zero Config field.
const (
	// RetryAfterDefault is Config.RetryAfter's default.
	RetryAfterDefault = 5 * time.Second
	// MaxInFlightDefault is Config.MaxInFlight's default.
	MaxInFlightDefault = 1024
	// MaxUnverifiedBytesDefault is Config.MaxUnverifiedBytes's default
	// (64 MiB), unless twice the largest source's body limit is more.
	MaxUnverifiedBytesDefault int64 = 64 << 20
	// MaxUnverifiedPerClientDefault is Config.MaxUnverifiedPerClient's
	// default.
	MaxUnverifiedPerClientDefault = 64
	// MinBodyRateDefault is Config.MinBodyRate's default, in bytes per
	// second (16 KiB/s).
	MinBodyRateDefault int64 = 16 << 10
	// SourceShareDefault is Config.SourceShare's default.
	SourceShareDefault = fairshare.ShareDefault
	// BodyGraceDefault is Config.BodyGrace's default.
	BodyGraceDefault = time.Second
)

// Config configures a Server: the settings of the receiver: section of the
// YAML configuration (ServerConfig, which pkg/config composes with the
// process's own keys), and what is set in code. WithDefaults applies the
// defaults stated in their comments, Validate checks the settings.
type Config struct {
	// Sources are the endpoints served. At least one.
	Sources []Source
	// ServerConfig holds the settings of the receiver: section, declared
	// in pkg/component so that pkg/config names a public type;
	// WithDefaults and Validate below default and check them.
	component.ServerConfig
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Metrics counts every delivery where it is logged. nil counts nothing.
	Metrics *metrics.Receiver
	// Rejections, when set, samples refusals of configured sources into
	// hookinbox_rejection (see package rejection for its bounds). nil
	// records none.
	Rejections *rejection.Recorder
	// TracerProvider, when set, traces each request to a configured source
	// (see tracing.go). nil traces nothing and costs nothing.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default; MaxUnverifiedBytes's derives from Sources (pkg/config
// sets it from the sources' limits first). It is idempotent.
func (c *Config) WithDefaults() *Config {
	out := *c
	out.RetryAfter = cmp.Or(out.RetryAfter, RetryAfterDefault)
	out.MaxInFlight = cmp.Or(out.MaxInFlight, MaxInFlightDefault)
	out.SourceShare = cmp.Or(out.SourceShare, SourceShareDefault)
	if out.MaxUnverifiedBytes == 0 {
		limits := make([]int64, len(out.Sources))
		for i := range out.Sources {
			limits[i] = out.Sources[i].MaxBodyBytes
		}
		out.MaxUnverifiedBytes = UnverifiedBytesFor(limits...)
	}
	out.MaxUnverifiedPerClient = cmp.Or(out.MaxUnverifiedPerClient, MaxUnverifiedPerClientDefault)
	out.MinBodyRate = cmp.Or(out.MinBodyRate, MinBodyRateDefault)
	out.BodyGrace = cmp.Or(out.BodyGrace, BodyGraceDefault)
	out.HTTPConfig = *out.HTTPConfig.WithDefaults()
	return &out
}

// Validate checks the settings (the tagged fields) of a Config that
// WithDefaults filled, and returns every problem found, each an error that
// starts with its key in the receiver: section ("max_in_flight: must be
// positive"), joined. New checks each source's body limit against
// MaxUnverifiedBytes (BodyFits).
func (c *Config) Validate() error {
	var errs []error
	positive := func(key string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", key))
		}
	}
	positive("retry_after", int64(c.RetryAfter))
	positive("max_in_flight", int64(c.MaxInFlight))
	if !(c.SourceShare > 0 && c.SourceShare <= 1) {
		errs = append(errs, errors.New("source_share: must be more than 0 and at most 1"))
	}
	positive("max_unverified_bytes", c.MaxUnverifiedBytes)
	positive("max_unverified_per_client", int64(c.MaxUnverifiedPerClient))
	positive("min_body_rate", c.MinBodyRate)
	if _, err := ParsePrefixes("trusted_proxies", c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.HTTPConfig.Validate())
	return errors.Join(errs...)
}

// HTTPConfig returns the HTTPConfig to serve s with: the connection limits
// of the Config s was built from, with its RetryAfter, TrustedProxies and
// Logger.
func (s *Server) HTTPConfig() *HTTPConfig {
	hc := s.config.HTTPConfig
	hc.RetryAfter = s.config.RetryAfter
	hc.TrustedProxies = s.trustedProxies
	hc.Logger = s.config.Logger
	return &hc
}

// Claimer claims a delivery's events in the inbox and enqueues their jobs,
// returning only after the commit. *inboxstore.Ingester (a transaction per
// delivery) and *inboxstore.Batcher (group commit) are claimers.
type Claimer interface {
	Ingest(ctx context.Context, delivery *inboxstore.Delivery) (*inboxstore.IngestResult, error)
}

// Server is the receiver's HTTP server.
type Server struct {
	echo     *echo.Echo
	ingester Claimer
	// slots holds a slot per delivery being handled (MaxInFlight), shared
	// among the sources (SourceShare).
	slots *fairshare.Budget
	// unverified accounts for the requests not verified yet.
	unverified *unverified
	sources    map[string]*Source
	// verifiers holds each source's current verifier (see WatchSecrets).
	verifiers map[string]*atomic.Pointer[liveVerifier]
	config    Config
	logger    *zap.Logger
	// trustedProxies are Config.TrustedProxies, parsed.
	trustedProxies []netip.Prefix
	// tracer is nil when tracing is off.
	tracer trace.Tracer
}

// New returns a Server that claims deliveries through ingester.
func New(ingester Claimer, config *Config) (*Server, error) {
	c := *config.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	s := &Server{
		ingester: ingester, slots: fairshare.New(c.MaxInFlight, c.SourceShare),
		unverified: newUnverified(c.MaxUnverifiedBytes, c.MaxUnverifiedPerClient, c.MinBodyRate, c.BodyGrace),
		sources:    map[string]*Source{}, verifiers: map[string]*atomic.Pointer[liveVerifier]{}, config: c, logger: sampleRejections(c.Logger, rejectionLogInterval, rejectionLogBurst),
	}
	s.trustedProxies, _ = ParsePrefixes("trusted_proxies", c.TrustedProxies) // Validate checked them.
	if c.TracerProvider != nil {
		s.tracer = c.TracerProvider.Tracer(tracerName)
	}
	for i := range c.Sources {
		src := &c.Sources[i]
		switch {
		case src.Verifier == nil:
			return nil, fmt.Errorf("receiver: source %q has no verifier", src.Name)
		case src.MaxBodyBytes <= 0 || src.AckTimeout <= 0:
			return nil, fmt.Errorf("receiver: source %q needs a positive body limit and ack timeout", src.Name)
		case !BodyFits(src.MaxBodyBytes, c.MaxUnverifiedBytes):
			return nil, fmt.Errorf("receiver: source %q's body limit (%d bytes) plus one is over half the unverified-body budget (%d bytes)",
				src.Name, src.MaxBodyBytes, c.MaxUnverifiedBytes)
		}
		s.sources[src.Name] = src
		s.verifiers[src.Name] = &atomic.Pointer[liveVerifier]{}
		s.verifiers[src.Name].Store(&liveVerifier{src.Verifier})
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(requestID)
	e.Any("/webhooks/:source", s.handleWebhook)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	// Ready: a receiver that serves should get traffic, whether the
	// database answers or not. Without it, a delivery gets 503 with
	// Retry-After from the receiver (the provider retries), where a
	// receiver taken out of its Service leaves the sender the proxy's own
	// answer, without Retry-After. pkg/daemon's front door answers /readyz
	// 503 before the database was first reached and once stopping.
	e.GET("/readyz", func(c echo.Context) error { return c.String(http.StatusOK, "ready\n") })
	s.echo = e
	if built != nil {
		built(s)
	}
	return s, nil
}

// built, when set, is told each Server New builds (export_test.go sets it:
// the e2e tests reach the server pkg/daemon builds through it).
var built func(*Server)

// UnverifiedBytesFor is the default MaxUnverifiedBytes for sources with
// these body limits: MaxUnverifiedBytesDefault, or twice the largest limit
// plus one (a body of unknown length read to the limit holds one byte more)
// when that is more.
func UnverifiedBytesFor(bodyLimits ...int64) int64 {
	// The least budget BodyFits accepts for each limit.
	n := MaxUnverifiedBytesDefault
	for _, limit := range bodyLimits {
		n = max(n, 2*(limit+1))
	}
	return n
}

// BodyFits reports whether a body at limit fits one client's half of an
// unverified-body budget of budget bytes: reading a body of unknown length
// to the limit holds one byte more, to tell that it ends there. New refuses
// a source it does not fit, and config validation says so first, naming the
// keys; this is the rule both apply.
func BodyFits(limit, budget int64) bool { return 2*(limit+1) <= budget }

// InFlight returns the number of deliveries being handled (see
// Config.MaxInFlight); 0 for a nil Server.
func (s *Server) InFlight() int {
	if s == nil {
		return 0
	}
	return s.slots.Held()
}

// Handler returns the server's http.Handler. pkg/daemon serves it behind
// its front door once the database is ready.
func (s *Server) Handler() http.Handler { return s.echo }

type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) handleWebhook(c echo.Context) error {
	start := time.Now()
	name := c.Param("source")
	src, ok := s.sources[name]
	if !ok {
		s.logRejected(c, zapcore.DebugLevel, name, start, http.StatusNotFound, "unknown_source")
		return c.JSON(http.StatusNotFound, errorBody{"unknown source"})
	}
	if c.Request().Method != http.MethodPost {
		s.logRejected(c, zapcore.DebugLevel, name, start, http.StatusMethodNotAllowed, "method")
		c.Response().Header().Set("Allow", http.MethodPost)
		return c.JSON(http.StatusMethodNotAllowed, errorBody{"only POST is accepted"})
	}
	if s.tracer != nil {
		defer s.traceRequest(c, src)()
	}
	// Until the body is being read, the connection gets the grace period
	// alone: a refusal below drains what the client still sends for that
	// long at most (net/http reads up to 256 KiB of an unread body to keep
	// the connection).
	rc := http.NewResponseController(c.Response().Writer)
	_ = rc.SetReadDeadline(start.Add(min(s.config.BodyGrace, src.AckTimeout)))
	ip := clientIP(c.Request(), s.trustedProxies)
	if len(src.AllowIPs) > 0 && !allowed(ip, src.AllowIPs) {
		s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusForbidden, "forbidden_ip", zap.String("client_ip", ip.String()))
		return c.JSON(http.StatusForbidden, errorBody{"address not allowed"})
	}

	// The body is held in the unverified budget until its signature is
	// known; max_in_flight slots are for verified deliveries only.
	// At a limit, the slowest body being read makes room (unverified.go).
	hold, ok := s.unverified.enter(ip, rc, start)
	if !ok {
		s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, "client_busy",
			zap.String("detail", "receiver.max_unverified_per_client requests from this address are being read, none of them slow"),
			zap.String("client_ip", ip.String()))
		return s.retryLater(c)
	}
	defer hold.release()
	defer attach(c.Request().Context(), hold)()
	br := &bodyReader{r: c.Request(), rc: rc, hold: hold, limit: src.MaxBodyBytes, ackDeadline: start.Add(src.AckTimeout),
		begin: start, grace: s.config.BodyGrace, rate: s.config.MinBodyRate}
	body, err := br.read()
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusRequestEntityTooLarge, "too_large", zap.Int64("limit", src.MaxBodyBytes))
			return c.JSON(http.StatusRequestEntityTooLarge, errorBody{"body exceeds " + strconv.FormatInt(src.MaxBodyBytes, 10) + " bytes"})
		case errors.Is(err, errBudget):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, "unverified_budget",
				zap.String("detail", "receiver.max_unverified_bytes are held by bodies not yet verified, none of them slower"), zap.String("client_ip", ip.String()))
			return s.retryLater(c)
		case errors.Is(err, errCut):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, "slowest_cut",
				zap.String("detail", "the body was the slowest being read when a limit was reached, and made room for another"),
				zap.String("client_ip", ip.String()), zap.Int64("received", hold.got.Load()))
			return s.retryLater(c)
		case errors.Is(err, errTooSlow):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusRequestTimeout, "body_too_slow",
				zap.String("detail", "the body arrived slower than receiver.min_body_rate"), zap.String("client_ip", ip.String()))
			return c.JSON(http.StatusRequestTimeout, errorBody{"body arrived too slowly"})
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusRequestTimeout, "body_timeout",
				zap.String("detail", "the body did not arrive within the ack timeout"))
			return c.JSON(http.StatusRequestTimeout, errorBody{"body not received within the ack timeout"})
		}
		s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusBadRequest, "bad_body", zap.Error(err))
		return c.JSON(http.StatusBadRequest, errorBody{"could not read body"})
	}

	// Loaded once: a secrets reload during this request does not change
	// the verifier that acknowledges it.
	verifier := s.verifier(name)
	delivery, err := verifier.Verify(body, c.Request().Header)
	if err != nil {
		s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusUnauthorized, "signature", zap.Error(err))
		return c.JSON(http.StatusUnauthorized, errorBody{"signature verification failed"})
	}
	hold.release() // verified: the body now counts against a slot

	if err := s.slots.Acquire(name); err != nil {
		if errors.Is(err, fairshare.ErrShare) {
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, metrics.ReasonSourceShare,
				zap.String("detail", "the source holds its receiver.source_share of the max_in_flight slots the other sources leave"),
				zap.Int("limit", s.slots.Limit(name)))
			return s.retryLater(c)
		}
		s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, "overloaded",
			zap.String("detail", "receiver.max_in_flight deliveries are being handled"), zap.Int("max_in_flight", s.config.MaxInFlight))
		return s.retryLater(c)
	}
	defer s.slots.Release(name)
	if delivery.Reply != nil {
		// A handshake or health check: answered, never stored.
		s.logDelivery(c, s.config.DeliveryLogLevel, name, start, "handshake", delivery.Reply.Status)
		return reply(c, delivery.Reply)
	}

	ctx, cancel := context.WithDeadline(c.Request().Context(), start.Add(src.AckTimeout))
	defer cancel()
	res, err := s.claim(ctx, inboxDelivery(src, body, delivery, c.Response().Header().Get(echo.HeaderXRequestID)))
	if err != nil {
		switch {
		case errors.Is(err, inboxstore.ErrSourceShare):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, metrics.ReasonSourceShare,
				zap.String("detail", "the source holds its receiver.source_share of the ingest queue the other sources leave"))
		case errors.Is(err, inboxstore.ErrOverloaded):
			s.logRejected(c, zapcore.WarnLevel, name, start, http.StatusServiceUnavailable, "overloaded",
				zap.String("detail", "the ingest queue is full"))
		default:
			s.logRejected(c, zapcore.ErrorLevel, name, start, http.StatusServiceUnavailable, "db_unavailable",
				zap.String("detail", "not committed"), zap.Error(err))
		}
		return s.retryLater(c)
	}
	status := http.StatusOK
	answer := func() error { return c.JSON(http.StatusOK, res.ClaimCounts) }
	if ack, ok := verifier.(provider.Acknowledger); ok {
		r := ack.Ack(res.ClaimCounts)
		status, answer = r.Status, func() error { return reply(c, &r) }
	}
	s.config.Metrics.Events(name, res.New, res.Duplicates, res.Twins)
	traceCounts(c, res)
	s.logDelivery(c, s.config.DeliveryLogLevel, name, start, metrics.OutcomeAccepted, status,
		zap.Int("new", res.New), zap.Int("duplicates", res.Duplicates), zap.Int("twins", res.Twins))
	return answer()
}

// logDelivery writes the one line the receiver logs for a delivery: its
// source, outcome, answer, latency and request id, then fields. It also
// counts the delivery, but for a rejected one, which logRejected counts.
func (s *Server) logDelivery(c echo.Context, level zapcore.Level, source string, start time.Time, outcome string, status int, fields ...zap.Field) {
	if outcome != metrics.OutcomeRejected {
		s.config.Metrics.Delivery(s.metricSource(source), outcome, "", time.Since(start))
	}
	traceOutcome(c, outcome, status)
	ce := s.logger.Check(level, "delivery")
	if ce == nil {
		return
	}
	ce.Write(append([]zap.Field{
		zap.String("source", source), zap.String("outcome", outcome), zap.Int("status", status),
		zap.Duration("latency", time.Since(start)), zap.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
	}, fields...)...)
}

// logRejected is logDelivery for a delivery answered with an error; reason
// is one of a small, fixed set (signature, too_large, overloaded, …).
func (s *Server) logRejected(c echo.Context, level zapcore.Level, source string, start time.Time, status int, reason string, fields ...zap.Field) {
	s.config.Metrics.Delivery(s.metricSource(source), metrics.OutcomeRejected, reason, time.Since(start))
	traceReason(c, reason)
	s.logDelivery(c, level, source, start, metrics.OutcomeRejected, status, append([]zap.Field{zap.String("reason", reason)}, fields...)...)
	if s.config.Rejections != nil {
		// Rate-limited per source and written in the background: a flood of
		// refusals costs a map lookup and a mutex, not a write each.
		s.config.Rejections.Record(source, reason, status, clientIP(c.Request(), s.trustedProxies).String(),
			c.Response().Header().Get(echo.HeaderXRequestID), c.Request().Header)
	}
}

// metricSource is source as a metric label: "" unless it is configured, so
// that names made up by clients cannot grow the metrics without bound.
func (s *Server) metricSource(source string) string {
	if _, ok := s.sources[source]; ok {
		return source
	}
	return ""
}

// requestID gives every request an id, sent back in X-Request-Id and logged
// with its delivery, so that a provider's delivery log, an ingress log and
// ours can be joined. An id an ingress already set is kept when it looks like
// one (at most 64 letters, digits, '-', '_' or '.'); anything else is
// replaced, since the header comes from an unauthenticated client.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !plausibleRequestID(id) {
			id = rand.Text()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

func plausibleRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.'
	}) < 0
}

// retryLater answers 503 with Retry-After: nothing of the delivery was
// stored, and the provider should send it again.
func (s *Server) retryLater(c echo.Context) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(s.config.RetryAfter.Round(time.Second)/time.Second)))
	return c.JSON(http.StatusServiceUnavailable, errorBody{"not stored; retry later"})
}

func reply(c echo.Context, r *provider.Reply) error {
	if r.ContentType != "" {
		c.Response().Header().Set(echo.HeaderContentType, r.ContentType)
	}
	c.Response().WriteHeader(r.Status)
	_, err := c.Response().Write(r.Body)
	return err
}

// inboxDelivery maps a verified delivery to the inbox's input. What of it
// may be stored (fallback ids, failed events, unindexable keys) is the
// inbox's decision, not the receiver's.
func inboxDelivery(src *Source, body []byte, d *provider.Delivery, requestID string) *inboxstore.Delivery {
	events := make([]inboxstore.IncomingEvent, len(d.Events))
	for i, ev := range d.Events {
		events[i] = inboxstore.IncomingEvent{ID: ev.ID, Type: ev.Type, Payload: ev.Payload, TwinKey: ev.TwinKey, ParseError: ev.ParseError}
	}
	return &inboxstore.Delivery{Source: src.Name, Provider: src.Provider, Body: body, Headers: d.Headers, Events: events, RequestID: requestID}
}

// errorHandler keeps Echo's own errors (unknown route, …) in our JSON shape.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	msg := "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = http.StatusText(code)
	} else {
		s.logger.Error("request failed", zap.Error(err))
	}
	_ = c.JSON(code, errorBody{msg})
}
