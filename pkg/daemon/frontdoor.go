package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/receiver"
)

// frontDoor is a daemon's HTTP listener. It is up before the database is
// reached: until open is called, GET /healthz answers 200 (the process
// lives) and every other request 503 with Retry-After (/readyz included, and
// a webhook, which the sender retries). Then the daemon's own handler
// answers. Once unready is called, /readyz answers 503 and every answer
// closes its connection, while every other request is still served.
type frontDoor struct {
	srv        *http.Server
	handler    atomic.Pointer[http.Handler]
	unreadyNow atomic.Bool
	retryAfter string
	served     chan error // http.Server.Serve's result
}

// openFrontDoor listens on the address at the config key listenKey
// ("receiver.listen") and starts serving within limits (connections,
// header size, header, idle and body deadlines: see receiver.HTTPConfig);
// it logs "WHAT listening".
func openFrontDoor(what, listenKey, addr string, limits *receiver.HTTPConfig) (*frontDoor, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", listenKey, err)
	}
	retryAfter := cmp.Or(limits.RetryAfter, receiver.RetryAfterDefault)
	d := &frontDoor{
		retryAfter: strconv.Itoa(max(1, int(retryAfter.Round(time.Second)/time.Second))),
		served:     make(chan error, 1),
	}
	var limited net.Listener
	d.srv, limited = receiver.NewHTTPServer(ln, d, limits)
	go func() { d.served <- d.srv.Serve(limited) }()
	limits.Logger.Info(what+" listening", zap.String("addr", ln.Addr().String()))
	return d, nil
}

// open hands every request from now on to h.
func (d *frontDoor) open(h http.Handler) { d.handler.Store(&h) }

// unready turns the door unready for a graceful stop: /readyz answers 503
// from now on, so that Kubernetes takes the pod out of its Service's
// endpoints, and every answer carries Connection: close, so that clients
// and proxies holding a keep-alive connection open their next one to
// another pod. Everything else is still served.
func (d *frontDoor) unready() { d.unreadyNow.Store(true) }

func (d *frontDoor) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if d.unreadyNow.Load() {
		rw.Header().Set("Connection", "close")
		if r.URL.Path == "/readyz" {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = rw.Write([]byte(`{"error":"shutting down"}` + "\n"))
			return
		}
	}
	if h := d.handler.Load(); h != nil {
		(*h).ServeHTTP(rw, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		_, _ = rw.Write([]byte("ok\n"))
		return
	}
	rw.Header().Set("Retry-After", d.retryAfter)
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusServiceUnavailable)
	_, _ = rw.Write([]byte(`{"error":"starting: waiting for the database"}` + "\n"))
}

// failed delivers the server's error if it stops serving on its own.
func (d *frontDoor) failed() <-chan error { return d.served }

// failedOrNever is failed, and a channel that never delivers for a nil
// door (an optional listener that is off), to select on either way.
func (d *frontDoor) failedOrNever() <-chan error {
	if d == nil {
		return nil
	}
	return d.served
}

// shutdown stops the server, letting requests in flight finish within
// timeout.
func (d *frontDoor) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-d.served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
