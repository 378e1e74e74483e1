package providerapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// GitHubDelivery is an element of GitHub's list of a hook's deliveries.
type GitHubDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action"`
}

// GitHub speaks GitHub's webhook deliveries API for one hook: GET
// <hook>/deliveries (per_page, cursor, a Link header naming the next page,
// newest first) and POST <hook>/deliveries/{id}/attempts, which, like
// GitHub, sends the delivery's payload again to the receiver, signed with
// the hook's secret (X-Hub-Signature-256) and under the same
// X-GitHub-Delivery, and lists the attempt as a redelivery.
type GitHub struct {
	Hook     string                     // "/repos/octo/hello/hooks/1"
	Auth     func(r *http.Request) bool // checks the credentials
	Receiver string                     // where deliveries go
	Secret   string                     // what they are signed with
	Fail     Failures

	mu         sync.Mutex
	Payloads   map[string][]byte // by guid
	Deliveries []GitHubDelivery  // newest first
	Requests   []string          // "METHOD /path?query"
	Answers    []int             // the receiver's answers to redeliveries
}

// NewGitHub returns the fake of hook, which delivers to receiver.
func NewGitHub(hook, receiver, secret string, auth func(r *http.Request) bool) *GitHub {
	return &GitHub{Hook: hook, Auth: auth, Receiver: receiver, Secret: secret, Payloads: map[string][]byte{}}
}

// Bearer checks a token.
func Bearer(token string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
}

// Add lists a delivery of guid (its first, or a redelivery) made at at,
// which the receiver answered status.
func (f *GitHub) Add(guid string, at time.Time, redelivery bool, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Payloads[guid] == nil {
		f.Payloads[guid] = fmt.Appendf(nil, `{"action":"opened","issue":{"number":%d},"repository":{"full_name":"octo/hello"}}`, len(f.Payloads)+1)
	}
	id := int64(len(f.Deliveries) + 1)
	text := "OK"
	if status != http.StatusOK {
		text = "Invalid HTTP Response: " + strconv.Itoa(status)
	}
	d := GitHubDelivery{ID: id, GUID: guid, DeliveredAt: at.UTC().Truncate(time.Second), Redelivery: redelivery, Duration: 0.3,
		Status: text, StatusCode: status, Event: "issues", Action: "opened"}
	// Newest first.
	i, _ := slices.BinarySearchFunc(f.Deliveries, d, func(a, b GitHubDelivery) int { return b.DeliveredAt.Compare(a.DeliveredAt) })
	f.Deliveries = slices.Insert(f.Deliveries, i, d)
}

// Headers are the headers GitHub sends with guid's payload body.
func (f *GitHub) Headers(guid string, body []byte) http.Header {
	return http.Header{
		"X-Hub-Signature-256": {sign.GitHub(f.Secret, body)},
		"X-Github-Delivery":   {guid},
		"X-Github-Event":      {"issues"},
		"X-Github-Hook-Id":    {"1"},
		"User-Agent":          {"GitHub-Hookshot/test"},
		"Content-Type":        {"application/json"},
	}
}

func (f *GitHub) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.RequestURI())
	n := len(f.Requests)
	f.mu.Unlock()
	switch {
	case r.Header.Get("X-GitHub-Api-Version") == "" || r.Header.Get("Accept") != "application/vnd.github+json":
		http.Error(rw, `{"message":"missing API version or Accept"}`, http.StatusBadRequest)
	case !f.Auth(r):
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`))
	case f.Fail.Answer(rw, n):
	case r.Method == http.MethodGet && r.URL.Path == f.Hook+"/deliveries":
		f.list(rw, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, f.Hook+"/deliveries/") && strings.HasSuffix(r.URL.Path, "/attempts"):
		f.redeliver(rw, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, f.Hook+"/deliveries/"), "/attempts"))
	default:
		http.NotFound(rw, r)
	}
}

func (f *GitHub) list(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	start := 0
	if c := q.Get("cursor"); c != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(c, "v1_"))
	}
	f.mu.Lock()
	end := min(start+perPage, len(f.Deliveries))
	page := slices.Clone(f.Deliveries[start:end])
	more := end < len(f.Deliveries)
	f.mu.Unlock()
	if more {
		next := fmt.Sprintf("http://%s%s/deliveries?per_page=%d&cursor=v1_%d", r.Host, f.Hook, perPage, end)
		rw.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <http://%s%s/deliveries?per_page=%d>; rel="first"`, next, r.Host, f.Hook, perPage))
	}
	_ = json.NewEncoder(rw).Encode(page)
}

func (f *GitHub) redeliver(rw http.ResponseWriter, id string) {
	f.mu.Lock()
	i := slices.IndexFunc(f.Deliveries, func(d GitHubDelivery) bool { return strconv.FormatInt(d.ID, 10) == id })
	var d GitHubDelivery
	if i >= 0 {
		d = f.Deliveries[i]
	}
	body := f.Payloads[d.GUID]
	f.mu.Unlock()
	switch {
	case i < 0:
		http.Error(rw, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	case time.Since(d.DeliveredAt) > 72*time.Hour:
		http.Error(rw, `{"message":"Validation Failed"}`, http.StatusUnprocessableEntity)
		return
	}
	status, err := Deliver(f.Receiver, f.Headers(d.GUID, body), body)
	if err != nil {
		status = 0
	}
	f.mu.Lock()
	f.Answers = append(f.Answers, status)
	f.mu.Unlock()
	f.Add(d.GUID, time.Now(), true, status)
	rw.WriteHeader(http.StatusAccepted)
	_, _ = rw.Write([]byte(`{}`))
}

// Deliver posts a webhook to url and returns the answer's status.
func Deliver(url string, header http.Header, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
