// Package receiver is hookinbox's HTTP front door: POST /webhooks/:source
// verifies a delivery's signature on the raw bytes, claims its events in the
// inbox with their River jobs in one transaction, and answers 2xx only after
// that transaction committed. Echo stays inside this package.
package receiver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// Source is one configured webhook endpoint.
type Source struct {
	// Name is the path segment and the inbox's source column.
	Name string
	// Provider is the provider's config name, stored with each row.
	Provider string
	// Verifier authenticates the source's deliveries.
	Verifier provider.Verifier
	// MaxBodyBytes is the body limit; larger bodies get 413. Required.
	MaxBodyBytes int64
	// AckTimeout bounds request-to-commit; past it the answer is 503. Required.
	AckTimeout time.Duration
	// AllowIPs, when non-empty, restricts deliveries to these networks;
	// other peers get 403 before anything is read.
	AllowIPs []netip.Prefix
}

// Config configures a Server.
type Config struct {
	// Sources are the endpoints served. At least one.
	Sources []Source
	// RetryAfter is sent with every 503. Defaults to 5s.
	RetryAfter time.Duration
	// MaxInFlight bounds the deliveries handled at once, from reading the
	// body to the answer; one more gets 503 with Retry-After at once,
	// without its body being read. It bounds the memory that bodies and
	// waiting requests hold. Defaults to 1024.
	MaxInFlight int
	// TrustedProxies are the networks of reverse proxies (an ingress) whose
	// X-Forwarded-For header is believed when checking a source's AllowIPs.
	// Empty means the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// Ready backs GET /readyz; nil means always ready.
	Ready func(ctx context.Context) error
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Claimer claims a delivery's events in the inbox and enqueues their jobs,
// returning only after the commit. *inbox.Ingester (a transaction per
// delivery) and *inbox.Batcher (group commit) are claimers.
type Claimer interface {
	Ingest(ctx context.Context, events []inbox.NewEvent) (*inbox.IngestResult, error)
}

// Server is the receiver's HTTP server.
type Server struct {
	echo     *echo.Echo
	ingester Claimer
	// slots holds a token per delivery being handled (MaxInFlight).
	slots   chan struct{}
	sources map[string]*Source
	config  Config
	logger  *zap.Logger
}

// New returns a Server that claims deliveries through ingester.
func New(ingester Claimer, config *Config) (*Server, error) {
	c := *config
	c.RetryAfter = cmp.Or(c.RetryAfter, 5*time.Second)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 1024)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	s := &Server{ingester: ingester, slots: make(chan struct{}, c.MaxInFlight), sources: map[string]*Source{}, config: c, logger: c.Logger}
	for i := range c.Sources {
		src := &c.Sources[i]
		switch {
		case src.Verifier == nil:
			return nil, fmt.Errorf("receiver: source %q has no verifier", src.Name)
		case src.MaxBodyBytes <= 0 || src.AckTimeout <= 0:
			return nil, fmt.Errorf("receiver: source %q needs a positive body limit and ack timeout", src.Name)
		}
		s.sources[src.Name] = src
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Any("/webhooks/:source", s.handleWebhook)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.handleReady)
	s.echo = e
	return s, nil
}

// Serve answers requests on ln until ctx is done, then shuts down gracefully
// within shutdownTimeout: in-flight deliveries finish and are answered.
func (s *Server) Serve(ctx context.Context, ln net.Listener, shutdownTimeout time.Duration) error {
	srv := &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	select {
	case err := <-errCh:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("receiver: shutdown: %w", err)
	}
	if err := <-errCh; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// deliveryResult is the 200 body.
type deliveryResult struct {
	New        int `json:"new"`
	Duplicates int `json:"duplicates"`
	Twins      int `json:"twins"`
}

type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) handleWebhook(c echo.Context) error {
	start := time.Now()
	src, ok := s.sources[c.Param("source")]
	if !ok {
		return c.JSON(http.StatusNotFound, errorBody{"unknown source"})
	}
	if c.Request().Method != http.MethodPost {
		c.Response().Header().Set("Allow", http.MethodPost)
		return c.JSON(http.StatusMethodNotAllowed, errorBody{"only POST is accepted"})
	}
	log := s.logger.With(zap.String("source", src.Name))
	if len(src.AllowIPs) > 0 {
		ip := clientIP(c.Request(), s.config.TrustedProxies)
		if !allowed(ip, src.AllowIPs) {
			log.Warn("delivery rejected", zap.Int("status", http.StatusForbidden), zap.String("client_ip", ip.String()))
			return c.JSON(http.StatusForbidden, errorBody{"address not allowed"})
		}
	}

	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		log.Warn("delivery refused: receiver.max_in_flight deliveries are being handled; asking the provider to retry",
			zap.Int("max_in_flight", s.config.MaxInFlight))
		return s.retryLater(c)
	}

	// A body that trickles in must not hold its slot past the ack timeout.
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(start.Add(src.AckTimeout))
	body, err := readBody(c.Request(), src.MaxBodyBytes)
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			log.Warn("delivery rejected", zap.Int("status", http.StatusRequestEntityTooLarge), zap.Int64("limit", src.MaxBodyBytes))
			return c.JSON(http.StatusRequestEntityTooLarge, errorBody{"body exceeds " + strconv.FormatInt(src.MaxBodyBytes, 10) + " bytes"})
		case errors.Is(err, os.ErrDeadlineExceeded):
			log.Warn("delivery rejected: the body did not arrive within the ack timeout", zap.Int("status", http.StatusRequestTimeout))
			return c.JSON(http.StatusRequestTimeout, errorBody{"body not received within the ack timeout"})
		}
		return c.JSON(http.StatusBadRequest, errorBody{"could not read body"})
	}

	delivery, err := src.Verifier.Verify(body, c.Request().Header)
	if err != nil {
		log.Warn("delivery rejected", zap.Int("status", http.StatusUnauthorized), zap.Error(err))
		return c.JSON(http.StatusUnauthorized, errorBody{"signature verification failed"})
	}
	if delivery.Reply != nil {
		// A handshake or health check: answered, never stored.
		log.Info("handshake answered", zap.Int("status", delivery.Reply.Status))
		return reply(c, delivery.Reply)
	}

	ctx, cancel := context.WithDeadline(c.Request().Context(), start.Add(src.AckTimeout))
	defer cancel()
	res, err := s.ingester.Ingest(ctx, newEvents(src, body, delivery))
	if err != nil {
		if errors.Is(err, inbox.ErrOverloaded) {
			log.Warn("delivery refused: the ingest queue is full; asking the provider to retry")
		} else {
			log.Error("delivery not committed; asking the provider to retry", zap.Error(err))
		}
		return s.retryLater(c)
	}
	log.Debug("delivery committed", zap.Int("new", res.New), zap.Int("duplicates", res.Duplicates),
		zap.Int("twins", res.Twins), zap.Duration("elapsed", time.Since(start)))
	if ack, ok := src.Verifier.(provider.Acknowledger); ok {
		r := ack.Ack(provider.Counts{New: res.New, Duplicates: res.Duplicates, Twins: res.Twins})
		return reply(c, &r)
	}
	return c.JSON(http.StatusOK, deliveryResult{New: res.New, Duplicates: res.Duplicates, Twins: res.Twins})
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

// newEvents turns a verified delivery into inbox rows. An event without a
// usable id (none, or one PostgreSQL could not index) is recorded as failed
// and keyed by the body's SHA-256 (and its position in a batch), so that
// resends still deduplicate. A twin key that could not be indexed is
// dropped, and the event type is cleaned to fit a text column.
func newEvents(src *Source, body []byte, d *provider.Delivery) []inbox.NewEvent {
	events := make([]inbox.NewEvent, len(d.Events))
	var bodyKey string
	for i, ev := range d.Events {
		ne := inbox.NewEvent{
			Source: src.Name, Provider: src.Provider, EventID: ev.ID, EventType: inbox.CleanText(ev.Type),
			Payload: ev.Payload, Body: body, Headers: d.Headers, TwinKey: ev.TwinKey,
		}
		if ev.ParseError != nil {
			ne.FailReason = "unparseable delivery: " + ev.ParseError.Error()
			ne.Payload = nil
		}
		if ne.EventID != "" {
			if err := inbox.CheckKey(ne.EventID); err != nil {
				ne.EventID = ""
				if ne.FailReason == "" {
					ne.FailReason = "unusable event id: it " + err.Error()
					ne.Payload = nil
				}
			}
		}
		if ne.EventID == "" {
			if bodyKey == "" {
				sum := sha256.Sum256(body)
				bodyKey = "sha256:" + hex.EncodeToString(sum[:])
			}
			ne.EventID = bodyKey
			if i > 0 {
				ne.EventID += ":" + strconv.Itoa(i)
			}
		}
		if ne.TwinKey != "" && inbox.CheckKey(ne.TwinKey) != nil {
			ne.TwinKey = ""
		}
		events[i] = ne
	}
	return events
}

var errTooLarge = errors.New("body too large")

// readBody reads at most limit bytes, failing fast on a Content-Length that
// already says more.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, errTooLarge
	}
	return body, nil
}

func (s *Server) handleReady(c echo.Context) error {
	if s.config.Ready == nil {
		return c.String(http.StatusOK, "ready\n")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.config.Ready(ctx); err != nil {
		s.logger.Warn("not ready", zap.Error(err))
		return c.JSON(http.StatusServiceUnavailable, errorBody{"not ready"})
	}
	return c.String(http.StatusOK, "ready\n")
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
