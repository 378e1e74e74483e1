package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoadDemandsOnlyWhatACommandNeeds loads one file, wrong in every
// section, as each command does, and checks that each is refused for the
// settings it uses, and only for those.
func TestLoadDemandsOnlyWhatACommandNeeds(t *testing.T) {
	t.Parallel()

	// Everything below is wrong or missing except database.url and log.
	const database = `
database:
  url: postgres://localhost/hookinbox
`
	const sources = `
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}"]
`
	const receiver = `
receiver:
  ack_timeout: -1s
`
	const worker = `
worker:
  concurrency: -1
  max_attempts: -1
`
	const routes = `
  routes: [{source: stripe, handlers: [log]}]
`
	set := map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret}

	for _, tt := range []struct {
		name  string
		needs Needs
		yaml  string
		env   map[string]string
		// want are the problems expected, all of them, in order (what could
		// not be read, then what is invalid); none means Load succeeds.
		want []string
	}{
		{
			name:  "MigrateNeedsOnlyTheDatabase",
			needs: NeedDatabase,
			yaml:  database + sources + receiver + worker,
		},
		{
			name:  "MigrateNeedsADatabaseURL",
			needs: NeedDatabase,
			yaml:  sources + receiver + worker,
			want:  []string{"database.url: required"},
		},
		{
			name:  "MigrateStillRefusesATypoAnywhere",
			needs: NeedDatabase,
			yaml:  database + sources + "    secret: x\n" + "worker:\n  concurency: 3\n",
			want: []string{
				"sources[stripe].secret: unknown key (did you mean secrets?)",
				"worker.concurency: unknown key (did you mean concurrency?)",
			},
		},
		{
			name:  "MigrateStillNeedsTheLog",
			needs: NeedDatabase,
			yaml:  database + "log:\n  level: loud\n",
			want:  []string{`log.level: must be debug, info, warn or error, not "loud"`},
		},
		{
			name:  "MigrateIgnoresBadValuesOfOtherSections",
			needs: NeedDatabase,
			yaml:  database + sources + "receiver:\n  ack_timeout: soon\n",
			env:   map[string]string{"HOOKINBOX_WORKER_CONCURRENCY": "lots"},
		},
		{
			name:  "ReceiverNeedsItsSectionTheSourcesAndMaxAttempts",
			needs: NeedDatabase | NeedReceiver,
			yaml:  database + sources + receiver + worker,
			want: []string{
				"sources[stripe].secrets[0]: environment variable STRIPE_WEBHOOK_SECRET is not set",
				"receiver.ack_timeout: must be positive",
				"worker.max_attempts: must be positive",
			},
		},
		{
			name:  "ReceiverNeedsASource",
			needs: NeedDatabase | NeedReceiver,
			yaml:  database,
			want:  []string{"sources: the receiver needs at least one source"},
		},
		{
			name:  "ReceiverNeedsNoRoute",
			needs: NeedDatabase | NeedReceiver,
			yaml:  database + sources,
			env:   set,
		},
		{
			// The signing secrets are the receiver's alone: a worker's
			// environment need not hold them.
			name:  "WorkerNeedsItsSectionAndTheSourcesButNotTheirSecrets",
			needs: NeedDatabase | NeedWorker,
			yaml:  database + sources + receiver + worker + routes,
			want: []string{
				"worker.concurrency: must be positive",
				"worker.max_attempts: must be positive",
			},
		},
		{
			name:  "WorkerNeedsARoute",
			needs: NeedDatabase | NeedWorker,
			yaml:  database + sources,
			env:   set,
			want:  []string{"worker.routes: the worker needs at least one route (with none, every event is unrouted)"},
		},
		{
			name:  "WorkerRoutesNameSources",
			needs: NeedDatabase | NeedWorker,
			yaml:  database + "worker:\n" + routes,
			want:  []string{`worker.routes[0].source: unknown source "stripe"`},
		},
		{
			// issue 38: inboxctl prune deleted rows the provider could
			// still redeliver, under a retention the worker refuses.
			name:  "InboxWritersCheckTheSourcesAsTheWorkerDoes",
			needs: NeedDatabase | NeedInbox,
			yaml:  database + sources + "    retention: 1h\n" + receiver + worker,
			want: []string{
				"sources[stripe].retention: 1h0m0s is shorter than stripe's redelivery window (720h0m0s)",
				"worker.max_attempts: must be positive",
			},
		},
		{
			name:  "InboxWritersNeedNoSigningSecretNorRoute",
			needs: NeedDatabase | NeedInbox,
			yaml:  database + sources + "    secrets_file: /nonexistent/hookinbox/secrets\n",
		},
		{
			name:  "SendNeedsNoDatabase",
			needs: NeedReceiver,
			yaml:  sources,
			env:   set,
		},
		{
			name:  "NeedSourcesAloneAllowsNone",
			needs: NeedSources,
			yaml:  "",
		},
		{
			// No signing secret at all: neither the variable, nor the
			// file, which provider.New would refuse for a receiver.
			name:  "WorkerStartsWithoutTheSigningSecrets",
			needs: NeedDatabase | NeedWorker,
			yaml: database + `
sources:
  - name: stripe
    provider: stripe
    secrets_file: /nonexistent/hookinbox/secrets
  - name: bank
    provider: standardwebhooks
    secrets: ["${BANK_SECRET}"]
worker:
  routes: [{source: "*", handlers: [log]}]
`,
		},
		{
			name:  "SecretsFilesAreReadOnlyWhenSourcesAreNeeded",
			needs: NeedDatabase,
			yaml:  database + sources + "    secrets_file: /nonexistent/hookinbox/secrets\n",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			cfg, err := loadIn(writeFile(t, "hookinbox.yaml", tt.yaml), tt.needs, tt.env)
			if len(tt.want) == 0 {
				require.NoError(t, err)
				require.NotNil(t, cfg)
				return
			}
			require.Error(t, err)
			lines := strings.Split(err.Error(), "\n")[1:]
			require.Len(t, lines, len(tt.want), err.Error())
			for i, want := range tt.want {
				require.True(t, strings.HasPrefix(lines[i], want), "line %d: want %q, got %q", i, want, lines[i])
			}
		})
	}
}

func TestNeedsCovers(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		key                                           string
		migrate, receiver, worker, sourcesOnly, inbox bool
		reconcile                                     bool // inboxctl reconcile
	}{
		{key: "database.url", migrate: true, receiver: true, worker: true, inbox: true, reconcile: true},
		{key: "log.level", migrate: true, receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true},
		{key: "receiver.ack_timeout", receiver: true},
		{key: "sources", receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true},
		{key: "sources[stripe].secrets[0]", receiver: true, sourcesOnly: true},
		{key: "sources[stripe].secrets_file", receiver: true, sourcesOnly: true},
		{key: "sources[stripe].basic_auth[0].password", receiver: true, sourcesOnly: true},
		{key: "sources[stripe].hmac.api_keys[1]", receiver: true, sourcesOnly: true},
		{key: "sources[stripe].reconcile.api_key", worker: true, sourcesOnly: true, reconcile: true},
		{key: "sources[stripe].queue", receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true},
		{key: "sources[stripe].retention", receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true},
		{key: "sources[stripe].hmac.header", receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true},
		{key: "worker.max_attempts", receiver: true, worker: true, inbox: true, reconcile: true},
		{key: "worker.routes[0].source", worker: true},
		{key: "workers", migrate: true, receiver: true, worker: true, sourcesOnly: true, inbox: true, reconcile: true}, // Not a section: an unknown top-level key.
	} {
		require.Equal(t, tt.migrate, NeedDatabase.covers(tt.key), "migrate %s", tt.key)
		require.Equal(t, tt.receiver, (NeedDatabase | NeedReceiver).covers(tt.key), "receiver %s", tt.key)
		require.Equal(t, tt.worker, (NeedDatabase | NeedWorker).covers(tt.key), "worker %s", tt.key)
		require.Equal(t, tt.sourcesOnly, NeedSources.covers(tt.key), "sources %s", tt.key)
		require.Equal(t, tt.inbox, (NeedDatabase | NeedInbox).covers(tt.key), "inbox writers %s", tt.key)
		require.Equal(t, tt.reconcile, (NeedDatabase | NeedInbox | NeedReconcile).covers(tt.key), "reconcile %s", tt.key)
	}
}
