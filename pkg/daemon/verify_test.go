package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/operator"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// The bank source's secrets during a rotation: the new one listed first
// (the current one), the old one still listed. And the shop's.
const (
	verifyNewSecret  = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	verifyOldSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	verifyShopSecret = "whsec_shop_endpoint_secret"
	verifyAdminToken = "admin-token-for-verify-tests-0123"
)

// verifyBundle is a database holding real deliveries, stored by the
// receiver from signed requests, and the config that names their secrets.
type verifyBundle struct {
	db          *dbtest.DB
	path        string // the config file
	secretsFile string // the bank source's secrets_file
	ids         map[string]int64
	body        string // the bank deliveries' body
	adminURL    string
}

func setupVerify(t *testing.T) *verifyBundle {
	t.Helper()
	db := dbtest.New(t)
	ctx := context.Background()
	b := &verifyBundle{db: db, secretsFile: filepath.Join(t.TempDir(), "bank-secrets"), ids: map[string]int64{},
		body: `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00"}}`}
	b.writeSecrets(t, verifyNewSecret, verifyOldSecret)
	b.path = writeConfig(t, fmt.Sprintf(`
database: {url: %q}
receiver: {listen: "127.0.0.1:0"}
worker: {admin: {token: %q}}
sources:
  - {name: bank, provider: standardwebhooks, secrets_file: %q}
  - {name: shop, provider: stripe, secrets: [%q]}
`, db.URL, verifyAdminToken, b.secretsFile, verifyShopSecret))
	cfg, err := config.Load(b.path, config.NeedDatabase|config.NeedReceiver)
	require.NoError(t, err)
	env := &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool}

	// Real deliveries through the receiver: signed with the new and the old
	// secret, one to alter, one to erase, and one of the stripe source.
	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop)
	url := serveReceiver(t, srv)
	for _, d := range []struct{ source, provider, secret, id, body string }{
		{"bank", "standardwebhooks", verifyNewSecret, "evt_new", b.body},
		{"bank", "standardwebhooks", verifyOldSecret, "evt_old", b.body},
		{"bank", "standardwebhooks", verifyNewSecret, "evt_altered", b.body},
		{"bank", "standardwebhooks", verifyOldSecret, "evt_erased", b.body},
		{"shop", "stripe", verifyShopSecret, "evt_shop", `{"id":"evt_shop","object":"event","type":"invoice.created"}`},
	} {
		header, err := webhook.Headers(&webhook.Params{
			Provider: d.provider, Secret: d.secret, EventID: d.id, Time: time.Now(), Body: []byte(d.body),
		})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, url+"/webhooks/"+d.source, strings.NewReader(d.body))
		require.NoError(t, err)
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, d.id)
	}

	// An event reconciliation listed from Stripe's API (an httptest server
	// speaking GET /v1/events): stored unsigned.
	api := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(rw, `{"object":"list","has_more":false,"data":[{"id":"evt_listed","object":"event","type":"invoice.created"}]}`)
	}))
	t.Cleanup(api.Close)
	parser, err := reconcile.StripeParser(cfg.Sources[1].ProviderConfig())
	require.NoError(t, err)
	fetcher, err := reconcile.NewStripe(&reconcile.StripeConfig{APIKey: "rk_test", BaseURL: api.URL, Parser: parser})
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	res, err := reconcile.Run(ctx, &reconcile.Params{
		Source: "shop", Provider: "stripe", Fetcher: fetcher, Since: time.Now().Add(-time.Hour),
		Claimer: inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}),
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.New)

	store := inboxstore.New(db.Pool)
	for _, key := range [][2]string{
		{"bank", "evt_new"}, {"bank", "evt_old"}, {"bank", "evt_altered"}, {"bank", "evt_erased"}, {"shop", "evt_shop"}, {"shop", "evt_listed"},
	} {
		info, err := store.Lookup(ctx, key[0], key[1])
		require.NoError(t, err)
		b.ids[key[1]] = info.ID
	}
	altered := strings.Replace(b.body, `"1.00"`, `"9.00"`, 1)
	tag, err := db.Pool.Exec(ctx, `UPDATE webhook_inbox_delivery SET body = $1 WHERE inbox_id = $2`, []byte(altered), b.ids["evt_altered"])
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	code, out := run(t, "inboxctl", "events", "purge", "--source", "bank", "evt_erased", "--yes", "--config", b.path)
	require.Equal(t, 0, code, out)

	// The worker's admin API on the same config.
	a, err := operator.NewAdmin(env.Pool, env.Config, client)
	require.NoError(t, err)
	h, err := a.Handler(verifyAdminToken, env.Logger)
	require.NoError(t, err)
	adminSrv := httptest.NewServer(h)
	t.Cleanup(adminSrv.Close)
	b.adminURL = adminSrv.URL
	return b
}

// writeSecrets replaces the bank source's secrets file, atomically.
func (b *verifyBundle) writeSecrets(t *testing.T, secrets ...string) {
	t.Helper()
	tmp := b.secretsFile + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(strings.Join(secrets, "\n")+"\n"), 0o600))
	require.NoError(t, os.Rename(tmp, b.secretsFile))
}

// verify runs inboxctl events verify --json with args and returns its exit
// status and results.
func (b *verifyBundle) verify(t *testing.T, args ...string) (int, []admin.Verification) {
	t.Helper()
	stdout, code := runStdout(t, append([]string{"events", "verify", "--json", "--config", b.path}, args...)...)
	var vs []admin.Verification
	require.NoError(t, json.Unmarshal([]byte(stdout), &vs), stdout)
	return code, vs
}

// runStdout runs inboxctl and returns its standard output alone, requiring
// it to quote no secret.
func runStdout(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := command(t, "inboxctl", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
		require.NotEqual(t, -1, code, "%v: %s", err, stderr.String())
	}
	for _, s := range []string{verifyNewSecret, verifyOldSecret, verifyShopSecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		require.NotContains(t, string(out)+stderr.String(), s)
	}
	return string(out), code
}

// adminVerify asks the admin API to verify source's eventID.
func (b *verifyBundle) adminVerify(t *testing.T, source, eventID, at string) (int, admin.Verification) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.adminURL+"/admin/v1/events/"+source+"/"+eventID+"/verify?at="+at, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+verifyAdminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var v admin.Verification
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &v), string(body))
	}
	return resp.StatusCode, v
}

func (b *verifyBundle) id(name string) string { return strconv.FormatInt(b.ids[name], 10) }

// TestEventsVerify re-verifies deliveries the receiver stored, through
// inboxctl and the admin API.
func TestEventsVerify(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds inboxctl")
	}

	t.Run("SaysWhatEachRowProves", func(t *testing.T) {
		t.Parallel()
		b := setupVerify(t)
		code, vs := b.verify(t, b.id("evt_new"), b.id("evt_old"), b.id("evt_altered"), b.id("evt_erased"),
			b.id("evt_shop"), b.id("evt_listed"), "999999999")
		require.Equal(t, 1, code, "not every row verified")
		require.Len(t, vs, 7)
		got := map[string]admin.Verification{}
		for _, v := range vs {
			got[v.EventID] = v
		}

		require.Equal(t, admin.VerifyVerified, got["evt_new"].Result, got["evt_new"].Reason)
		require.Equal(t, "secret 1 of 2 (current)", got["evt_new"].MatchedSecret)
		require.Equal(t, 1, got["evt_new"].Secret)
		require.Equal(t, got["evt_new"].ReceivedAt, got["evt_new"].AsOf, "as of its arrival by default")

		require.Equal(t, admin.VerifyVerified, got["evt_old"].Result, got["evt_old"].Reason)
		require.Equal(t, "secret 2 of 2 (older)", got["evt_old"].MatchedSecret)
		require.Equal(t, 2, got["evt_old"].Secrets)

		require.Equal(t, admin.VerifyFailed, got["evt_altered"].Result)
		require.Contains(t, got["evt_altered"].Reason, "no v1 signature matches a configured secret")
		require.Empty(t, got["evt_altered"].MatchedSecret)

		require.Equal(t, admin.VerifyErased, got["evt_erased"].Result)
		require.Contains(t, got["evt_erased"].Reason, "can no longer be verified")

		require.Equal(t, admin.VerifyVerified, got["evt_shop"].Result, got["evt_shop"].Reason)
		require.Equal(t, "secret 1 of 1 (current)", got["evt_shop"].MatchedSecret)

		require.Equal(t, admin.VerifyUnsigned, got["evt_listed"].Result)
		require.Contains(t, got["evt_listed"].Reason, "reconciliation (stripe-api)")

		require.Equal(t, admin.VerifyNotFound, got[""].Result)
		require.Equal(t, int64(999999999), got[""].ID)
	})

	t.Run("TextNamesTheSecretAndExitsZeroWhenAllVerify", func(t *testing.T) {
		t.Parallel()
		b := setupVerify(t)
		out, code := runStdout(t, "events", "verify", b.id("evt_new"), b.id("evt_old"), "--config", b.path)
		require.Equal(t, 0, code, out)
		require.Regexp(t, `^ID +SOURCE +EVENT_ID +RESULT +SECRET +AS_OF +REASON\n`, out)
		require.Regexp(t, `(?m)^\d+ +bank +evt_new +verified +secret 1 of 2 \(current\) +\S+ +-$`, out)
		require.Regexp(t, `(?m)^\d+ +bank +evt_old +verified +secret 2 of 2 \(older\) +\S+ +-$`, out)

		out, code = runStdout(t, "events", "verify", "--source", "bank", "evt_altered", "evt_erased", "--config", b.path)
		require.Equal(t, 1, code, out)
		require.Regexp(t, `(?m)^\d+ +bank +evt_altered +failed +- +\S+ +standardwebhooks: no v1 signature matches`, out)
		require.Regexp(t, `(?m)^\d+ +bank +evt_erased +erased +- +- +its body and headers were erased`, out)
	})

	t.Run("FailsOnceItsSecretIsRemoved", func(t *testing.T) {
		t.Parallel()
		b := setupVerify(t)
		code, before := b.adminVerify(t, "bank", "evt_old", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, admin.VerifyVerified, before.Result)

		b.writeSecrets(t, verifyNewSecret) // the rotation's last step
		exit, vs := b.verify(t, "--source", "bank", "evt_old", "evt_new")
		require.Equal(t, 1, exit)
		require.Equal(t, admin.VerifyFailed, vs[0].Result)
		require.Contains(t, vs[0].Reason, "no v1 signature matches a configured secret")
		require.Equal(t, admin.VerifyVerified, vs[1].Result)
		require.Equal(t, "secret 1 of 1 (current)", vs[1].MatchedSecret)

		// The running worker's API reads the secrets file again too.
		code, after := b.adminVerify(t, "bank", "evt_old", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, vs[0], after, "the API answers what inboxctl prints")
	})

	t.Run("AdminAPIAnswersWhatInboxctlPrints", func(t *testing.T) {
		t.Parallel()
		b := setupVerify(t)
		for _, name := range []string{"evt_new", "evt_old", "evt_altered", "evt_erased"} {
			_, vs := b.verify(t, b.id(name))
			code, v := b.adminVerify(t, "bank", name, "")
			require.Equal(t, http.StatusOK, code, name)
			require.Equal(t, vs[0], v, name)
		}
		code, _ := b.adminVerify(t, "bank", "evt_none", "")
		require.Equal(t, http.StatusNotFound, code)
		code, _ = b.adminVerify(t, "bank", "evt_new", "yesterday")
		require.Equal(t, http.StatusBadRequest, code)
	})

	t.Run("AtChoosesTheClockOfTheTolerance", func(t *testing.T) {
		t.Parallel()
		b := setupVerify(t)
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		exit, vs := b.verify(t, "--source", "bank", "evt_new", "--at", later)
		require.Equal(t, 1, exit)
		require.Equal(t, admin.VerifyFailed, vs[0].Result)
		require.Contains(t, vs[0].Reason, "timestamp outside tolerance")
		require.Equal(t, later, vs[0].AsOf.UTC().Format(time.RFC3339))

		exit, vs = b.verify(t, "--source", "bank", "evt_new", "--at", "now")
		require.Equal(t, 0, exit, vs[0].Reason)
		exit, vs = b.verify(t, "--source", "bank", "evt_new", "--at", "received")
		require.Equal(t, 0, exit, vs[0].Reason)
		require.Equal(t, vs[0].ReceivedAt, vs[0].AsOf)

		code, v := b.adminVerify(t, "bank", "evt_new", later)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, admin.VerifyFailed, v.Result)
	})

	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, daemonConfig(dbtest.New(t).URL))
		for _, tt := range []struct {
			args []string
			says string
		}{
			{[]string{"events", "verify"}, "requires at least 1 arg(s)"},
			{[]string{"events", "verify", "evt_1"}, `"evt_1" is not an inbox id`},
			{[]string{"events", "verify", "1", "--at", "yesterday"}, `--at must be "received", "now" or an RFC 3339 time`},
		} {
			code, out := run(t, "inboxctl", append(tt.args, "--config", path)...)
			require.Equal(t, 2, code, "%q: %s", tt.args, out)
			require.Contains(t, out, tt.says)
		}
	})
}
