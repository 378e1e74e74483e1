package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// Prefix is the admin API's path prefix on the worker's listener.
const Prefix = "/admin/v1/"

// maxRequestBody bounds a request's JSON body (a pause's reason).
const maxRequestBody = 64 << 10

// ErrNoToken is returned by Handler without a token: the API is never
// served open.
var ErrNoToken = errors.New("admin: the admin API needs a bearer token (worker.admin.token)")

// Handler returns the admin HTTP API, every route behind "Authorization:
// Bearer <token>" (compared in constant time; 401 otherwise):
//
//	GET  /admin/v1/stats                                   backlog, queues, paused sources
//	GET  /admin/v1/sources                                 every source's state
//	POST /admin/v1/sources/{source}/pause                  body {"reason": "…"} (optional)
//	POST /admin/v1/sources/{source}/resume
//	GET  /admin/v1/sources/{source}/rejections?limit=N
//	GET  /admin/v1/events?source=&status=&type=&since=&limit=
//	GET  /admin/v1/events/{source}/{event_id}
//	POST /admin/v1/events/{source}/{event_id}/replay
//	GET  /admin/v1/events/{source}/{event_id}/verify?at=   at: received (default), now or an RFC 3339 time
//
// Answers are JSON; errors are {"error": "…"} with 400, 401, 404, 409 or 500.
func (a *Admin) Handler(token secret.String, logger *zap.Logger) (http.Handler, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	api := &api{admin: a, logger: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/v1/stats", api.stats)
	mux.HandleFunc("GET /admin/v1/sources", api.sources)
	mux.HandleFunc("POST /admin/v1/sources/{source}/pause", api.pause)
	mux.HandleFunc("POST /admin/v1/sources/{source}/resume", api.resume)
	mux.HandleFunc("GET /admin/v1/sources/{source}/rejections", api.rejections)
	mux.HandleFunc("GET /admin/v1/events", api.list)
	mux.HandleFunc("GET /admin/v1/events/{source}/{event_id}", api.show)
	mux.HandleFunc("POST /admin/v1/events/{source}/{event_id}/replay", api.replay)
	mux.HandleFunc("GET /admin/v1/events/{source}/{event_id}/verify", api.verify)
	mux.HandleFunc("/admin/v1/", func(rw http.ResponseWriter, _ *http.Request) {
		writeError(rw, http.StatusNotFound, "no such admin endpoint")
	})
	return requireToken(token, mux), nil
}

// requireToken lets through requests bearing token. Both sides are hashed
// first, so the comparison takes the same time whatever the lengths.
func requireToken(token secret.String, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token.Reveal()))
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="hookinbox admin"`)
			writeError(rw, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(rw, r)
	})
}

type api struct {
	admin  *Admin
	logger *zap.Logger
}

func (h *api) stats(rw http.ResponseWriter, r *http.Request) {
	s, err := h.admin.Stats(r.Context())
	h.answer(rw, r, s, err)
}

func (h *api) sources(rw http.ResponseWriter, r *http.Request) {
	s, err := h.admin.Sources(r.Context())
	h.answer(rw, r, s, err)
}

func (h *api) pause(rw http.ResponseWriter, r *http.Request) {
	var body struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, maxRequestBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			writeError(rw, http.StatusBadRequest, "the body must be {\"reason\": \"…\"}: "+err.Error())
			return
		}
	}
	source := r.PathValue("source")
	changed, err := h.admin.Pause(r.Context(), source, "admin-api", body.Reason)
	if err == nil {
		h.logger.Info("source paused through the admin API", zap.String("source", source), zap.Bool("was_running", changed))
	}
	h.answer(rw, r, map[string]any{"source": source, "paused": true, "was_running": changed}, err)
}

func (h *api) resume(rw http.ResponseWriter, r *http.Request) {
	source := r.PathValue("source")
	n, err := h.admin.Resume(r.Context(), source)
	if err == nil {
		h.logger.Info("source resumed through the admin API", zap.String("source", source), zap.Int("enqueued", n))
	}
	h.answer(rw, r, map[string]any{"source": source, "paused": false, "enqueued": n}, err)
}

func (h *api) rejections(rw http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 0)
	if err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	s, err := h.admin.Rejections(r.Context(), r.PathValue("source"), limit)
	h.answer(rw, r, s, err)
}

func (h *api) list(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := inboxstore.ListParams{Source: q.Get("source"), EventType: q.Get("type")}
	switch st := inbox.Status(q.Get("status")); st {
	case "", inbox.StatusPending, inbox.StatusDone, inbox.StatusFailed:
		p.Status = st
	default:
		writeError(rw, http.StatusBadRequest, "status must be pending, done or failed")
		return
	}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			writeError(rw, http.StatusBadRequest, "since must be an RFC 3339 time")
			return
		}
		p.Since = t
	}
	var err error
	if p.Limit, err = intParam(r, "limit", 100); err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	infos, err := h.admin.List(r.Context(), &p)
	if infos == nil {
		infos = []inboxstore.EventInfo{}
	}
	h.answer(rw, r, infos, err)
}

func (h *api) show(rw http.ResponseWriter, r *http.Request) {
	info, err := h.admin.Show(r.Context(), r.PathValue("source"), r.PathValue("event_id"))
	h.answer(rw, r, info, err)
}

func (h *api) replay(rw http.ResponseWriter, r *http.Request) {
	source, eventID := r.PathValue("source"), r.PathValue("event_id")
	info, err := h.admin.Replay(r.Context(), source, eventID)
	if err == nil {
		h.logger.Info("event replayed through the admin API", zap.String("source", source), zap.String("event_id", eventID))
	}
	h.answer(rw, r, info, err)
}

// verify answers a Verification, 200 whatever its result: the request
// succeeded, and the result says what the row proves.
func (h *api) verify(rw http.ResponseWriter, r *http.Request) {
	at, err := ParseAt(r.URL.Query().Get("at"), time.Now())
	if err != nil {
		writeError(rw, http.StatusBadRequest, err.Error())
		return
	}
	v, err := h.admin.VerifyEvent(r.Context(), r.PathValue("source"), r.PathValue("event_id"), at)
	h.answer(rw, r, v, err)
}

// answer writes v as JSON, or err with its status.
func (h *api) answer(rw http.ResponseWriter, r *http.Request, v any, err error) {
	switch {
	case err == nil:
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(v)
	case errors.Is(err, ErrUnknownSource), errors.Is(err, inbox.ErrNotFound):
		writeError(rw, http.StatusNotFound, err.Error())
	case errors.Is(err, inboxstore.ErrNotPaused), errors.Is(err, inboxstore.ErrNotReplayable):
		writeError(rw, http.StatusConflict, err.Error())
	default:
		h.logger.Error("admin API request failed", zap.String("path", r.URL.Path), zap.Error(err))
		writeError(rw, http.StatusInternalServerError, "internal error; see the worker's log")
	}
}

func writeError(rw http.ResponseWriter, status int, msg string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(map[string]string{"error": msg})
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10000 {
		return 0, errors.New(name + " must be a whole number from 0 to 10000")
	}
	return n, nil
}
