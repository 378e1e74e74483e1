package receiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// TestEndToEndGroupCommit sends a 50 % duplicate mix from 64 concurrent
// clients through the group-commit receiver and checks every promise per
// request: each event is new for exactly one delivery, the counts add up,
// and there is one row and one job per distinct event.
func TestEndToEndGroupCommit(t *testing.T) {
	t.Parallel()
	const (
		secret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		clients     = 64
		perClient   = 8
		distinctIDs = clients * perClient / 2
	)
	// A generous ack timeout: this test is about exact counts, not speed,
	// and -race on a busy 2-core machine is slow.
	b := setupE2E(t, config.SourceConfig{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}, AckTimeout: time.Minute})

	type answer struct {
		id     string
		status int
		counts map[string]int
	}
	answers := make(chan answer, clients*perClient)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range perClient {
				// Every id is sent by two different clients.
				id := fmt.Sprintf("msg_%04d", (c*perClient+i)%distinctIDs)
				body := []byte(fmt.Sprintf(`{"type":"account.deposit","id":%q}`, id))
				header, err := webhook.Headers(&webhook.Params{
					Provider: "standardwebhooks", Secret: secret, EventID: id, Time: time.Now(), Body: body,
				})
				if err != nil {
					t.Error(err)
					return
				}
				r, err := b.tryPost("bank", header, body)
				if err != nil {
					t.Error(err)
					return
				}
				a := answer{id: id, status: r.Status}
				if r.Status == http.StatusOK {
					if err := json.Unmarshal(r.Body, &a.counts); err != nil {
						t.Errorf("body %q: %v", r.Body, err)
						return
					}
				}
				answers <- a
			}
		}()
	}
	close(start)
	wg.Wait()
	close(answers)

	newFor := map[string]int{}
	dupFor := map[string]int{}
	for a := range answers {
		require.Equal(t, http.StatusOK, a.status, a.id)
		require.Equal(t, 1, a.counts["new"]+a.counts["duplicates"], a.id)
		newFor[a.id] += a.counts["new"]
		dupFor[a.id] += a.counts["duplicates"]
	}
	require.Len(t, newFor, distinctIDs)
	for id := range newFor {
		require.Equal(t, 1, newFor[id], "%s is new for exactly one delivery", id)
		require.Equal(t, 1, dupFor[id], "%s is a duplicate for the other", id)
	}
	var rows, commits int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT xmin::text) FROM webhook_inbox`).Scan(&rows, &commits))
	require.Equal(t, distinctIDs, rows)
	require.Equal(t, distinctIDs, b.jobCount(t))
	t.Logf("%d events committed in %d transactions", rows, commits)
}
