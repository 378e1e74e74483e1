package reconcile

import (
	"cmp"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The defaults NewGitHub applies to a zero GitHubConfig field, and GitHub's
// own bounds.
const (
	// GitHubBaseURLDefault is GitHubConfig.BaseURL's default.
	GitHubBaseURLDefault = "https://api.github.com"
	// GitHubPageSizeDefault is GitHubConfig.PageSize's default, GitHub's
	// largest page.
	GitHubPageSizeDefault = 100
	// GitHubMaxRedeliveriesDefault is GitHubConfig.MaxRedeliveries's
	// default.
	GitHubMaxRedeliveriesDefault = 3
	// GitHubWindow is how far back GitHub redelivers: 3 days, less an hour
	// so that a run never asks for one GitHub has just stopped accepting.
	GitHubWindow = 71 * time.Hour
	// githubAPIVersion is the REST API version asked for.
	githubAPIVersion = "2022-11-28"
)

// githubHook matches GitHubConfig.Hook.
var githubHook = regexp.MustCompile(`^(repos/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/hooks/[0-9]+|orgs/[A-Za-z0-9_.-]+/hooks/[0-9]+|app)$`)

// GitHubConfig configures a GitHub redeliverer.
type GitHubConfig struct {
	// Hook names the webhook: "repos/OWNER/REPO/hooks/ID", "orgs/ORG/hooks/ID"
	// or "app" (the GitHub App's webhook). Required.
	Hook string
	// Token authenticates a repository or organisation hook: a token that
	// may read and redeliver its deliveries (repository webhooks: read and
	// write; organisation: admin:org_hook). Required unless Hook is "app".
	Token string
	// AppID and PrivateKey authenticate as the GitHub App, with a JWT signed
	// with the key (RS256), for Hook "app". Required for it.
	AppID      string
	PrivateKey *rsa.PrivateKey
	// BaseURL is the API's root. Defaults to https://api.github.com
	// (GitHub Enterprise Server: https://HOST/api/v3).
	BaseURL string
	// PageSize is per_page, 1 to 100. Defaults to 100.
	PageSize int
	// MaxRedeliveries is how many redeliveries of one delivery GitHub may
	// list before a run stops asking for another (the receiver keeps
	// refusing it: see its rejection samples). Defaults to 3.
	MaxRedeliveries int
	// Retry is how 429s, 5xx and rate limits are retried; its Now defaults
	// to Now.
	Retry RetryConfig
	// Now defaults to time.Now.
	Now func() time.Time
}

// GitHub reconciles a GitHub webhook: GitHub never retries a failed
// delivery, so it lists the hook's recent deliveries and asks GitHub to
// redeliver those whose X-GitHub-Delivery the inbox lacks, whatever
// GitHub's own status for them (a delivery GitHub saw answered 2xx but the
// inbox lacks is redelivered too). The redelivery comes through the
// receiver, signed, like any delivery: nothing is stored here.
type GitHub struct {
	config GitHubConfig
	api    *apiClient
	path   string // "/repos/o/r/hooks/1/deliveries"
}

// NewGitHub returns a GitHub redeliverer.
func NewGitHub(config *GitHubConfig) (*GitHub, error) {
	c := *config
	if !githubHook.MatchString(c.Hook) {
		return nil, fmt.Errorf("reconcile: github: hook %q is not repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app", c.Hook)
	}
	path := "/" + c.Hook + "/deliveries"
	if c.Hook == "app" {
		path = "/app/hook/deliveries"
		if c.AppID == "" || c.PrivateKey == nil {
			return nil, errors.New("reconcile: github: hook app needs AppID and PrivateKey")
		}
	} else if c.Token == "" {
		return nil, errors.New("reconcile: github: Token is required for a repository or organisation hook")
	}
	var err error
	if c.BaseURL, c.PageSize, err = listing("github", c.BaseURL, GitHubBaseURLDefault, c.PageSize, GitHubPageSizeDefault, 100); err != nil {
		return nil, err
	}
	c.MaxRedeliveries = cmp.Or(c.MaxRedeliveries, GitHubMaxRedeliveriesDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Retry.Now == nil {
		c.Retry.Now = c.Now
	}
	g := &GitHub{config: c, path: path}
	g.api = &apiClient{name: "github", retry: c.Retry.withDefaults(), describe: githubErrorMessage, auth: g.auth}
	return g, nil
}

func (g *GitHub) auth(req *http.Request) error {
	token := g.config.Token
	if g.config.Hook == "app" {
		jwt, err := githubAppJWT(g.config.AppID, g.config.PrivateKey, g.config.Now())
		if err != nil {
			return err
		}
		token = jwt
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", githubAPIVersion)
	return nil
}

// githubDelivery is an element of the list of a hook's deliveries.
type githubDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
}

// githubGUID is what a run learnt of one X-GitHub-Delivery.
type githubGUID struct {
	newest       int64 // the newest delivery's id, the one redelivered
	redeliveries int
	first        time.Time // the oldest delivery listed
	event        string
}

// Reconcile lists the hook's deliveries made within window (its start
// bounded by GitHubWindow; a delivery counts from its first listed
// delivery) and asks GitHub to redeliver each one whose guid known reports
// missing, or, when dryRun, only lists them. Fetched counts the distinct
// guids listed, Duplicates those the inbox holds, Redelivered (and
// Missing) those asked for again, or that would be; Abandoned names those
// already redelivered MaxRedeliveries times, left alone.
func (g *GitHub) Reconcile(ctx context.Context, window Window, known func(ctx context.Context, guid string) (bool, error), dryRun bool) (*Result, error) {
	if floor := g.config.Now().Add(-GitHubWindow); window.Since.Before(floor) {
		window.Since = floor
	}
	guids, order, err := g.list(ctx, window.Since)
	if err != nil {
		return &Result{}, err
	}
	res := &Result{}
	for _, guid := range order {
		d := guids[guid]
		if window.after(d.first) {
			continue
		}
		res.Fetched++
		held, err := known(ctx, guid)
		if err != nil {
			return res, fmt.Errorf("reconcile: github: look %s up: %w", guid, err)
		}
		switch {
		case held:
			res.Duplicates++
			continue
		case d.redeliveries >= g.config.MaxRedeliveries:
			res.Abandoned = append(res.Abandoned, guid)
			continue
		}
		if !dryRun {
			attempts := g.path + "/" + strconv.FormatInt(d.newest, 10) + "/attempts"
			if _, err := g.api.do(ctx, apiCall{method: http.MethodPost, url: g.config.BaseURL + attempts, label: "POST " + g.pathLabel() + "/{id}/attempts"}); err != nil {
				return res, err
			}
		}
		res.Redelivered++
		res.Missing = append(res.Missing, Missing{ID: guid, Type: d.event, At: d.first})
	}
	return res, nil
}

// list returns the deliveries at or after since by guid, and the guids
// newest first.
func (g *GitHub) list(ctx context.Context, since time.Time) (map[string]*githubGUID, []string, error) {
	guids := map[string]*githubGUID{}
	var order []string
	cursor := ""
	for {
		q := url.Values{}
		q.Set("per_page", strconv.Itoa(g.config.PageSize))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		ans, err := g.api.do(ctx, apiCall{method: http.MethodGet, url: g.config.BaseURL + g.path + "?" + q.Encode(), label: "GET " + g.pathLabel()})
		if err != nil {
			return nil, nil, err
		}
		var page []githubDelivery
		if err := json.Unmarshal(ans.body, &page); err != nil {
			return nil, nil, fmt.Errorf("reconcile: github: decode the deliveries: %w", err)
		}
		older := false
		for _, d := range page {
			if d.DeliveredAt.Before(since) {
				// Newest first: the rest are older still.
				older = true
				break
			}
			if d.GUID == "" {
				continue
			}
			seen := guids[d.GUID]
			if seen == nil {
				seen = &githubGUID{newest: d.ID}
				guids[d.GUID] = seen
				order = append(order, d.GUID)
			}
			if d.Redelivery {
				seen.redeliveries++
			}
			// Newest first: the last one seen is the oldest.
			seen.first, seen.event = d.DeliveredAt, d.Event
		}
		next := nextCursor(ans.header.Get("Link"))
		if older || next == "" {
			return guids, order, nil
		}
		if next == cursor {
			return nil, nil, errors.New("reconcile: github: the Link header names the same cursor twice")
		}
		cursor = next
	}
}

// pathLabel is the list path with its ids hidden, for errors.
func (g *GitHub) pathLabel() string {
	switch {
	case g.config.Hook == "app":
		return g.path
	case strings.HasPrefix(g.config.Hook, "orgs/"):
		return "/orgs/{org}/hooks/{hook_id}/deliveries"
	default:
		return "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries"
	}
}

// nextCursor reads the cursor of the rel="next" link of a Link header, ""
// when there is none. Only the cursor is kept: the next request is built
// from BaseURL, so that the token never goes where an answer points.
func nextCursor(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return ""
		}
		return u.Query().Get("cursor")
	}
	return ""
}

// githubErrorMessage extracts message from a GitHub error answer.
func githubErrorMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	return "no error message"
}
