package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// HeaderReconciled is the audit header stored with every event
// reconciliation claimed, naming the API it was listed from.
const HeaderReconciled = "X-Hookinbox-Reconciled"

// Params say what Run reconciles.
type Params struct {
	// Source and Provider name the inbox source ("stripe", "stripe").
	Source, Provider string
	// Fetcher lists the provider's events.
	Fetcher Fetcher
	// Since is the oldest creation time listed; Until, unless zero, the
	// newest.
	Since, Until time.Time
	// Claimer claims each page in one transaction (an *inboxstore.Ingester),
	// or only says what it would claim (DryRun).
	Claimer Claimer
}

// Claimer claims deliveries and enqueues their jobs in one transaction, as
// the receiver does (*inboxstore.Ingester).
type Claimer interface {
	IngestGroup(ctx context.Context, group []*inboxstore.Delivery) ([]*inboxstore.IngestResult, error)
}

// DryRun returns a Claimer that claims nothing: it says what ingester would
// claim (inboxstore.Ingester.IngestGroupDry), so that Run lists what the
// inbox lacks and changes nothing.
func DryRun(ingester *inboxstore.Ingester) Claimer { return dryClaimer{ingester} }

type dryClaimer struct{ ingester *inboxstore.Ingester }

func (d dryClaimer) IngestGroup(ctx context.Context, group []*inboxstore.Delivery) ([]*inboxstore.IngestResult, error) {
	return d.ingester.IngestGroupDry(ctx, group)
}

// Result counts what Run saw and did.
type Result struct {
	// Fetched counts the events the API listed.
	Fetched int `json:"fetched"`
	// New counts the events the inbox was missing, now claimed and enqueued.
	New int `json:"new"`
	// Duplicates counts the events already in the inbox by id; Twins those
	// already there by twin key.
	Duplicates int `json:"duplicates"`
	Twins      int `json:"twins"`
	// Redelivered counts the deliveries the provider was asked to send
	// again (GitHub): they come back through the receiver, verified.
	Redelivered int `json:"redelivered,omitempty"`
	// Abandoned names the deliveries missing from the inbox that the
	// provider already redelivered GitHubConfig.MaxRedeliveries times, not
	// asked for again.
	Abandoned []string `json:"abandoned,omitempty"`
	// Missing are the events the inbox lacked, in the order listed: those
	// counted by New, or by Redelivered (GitHub: each delivery's guid).
	Missing []Missing `json:"missing,omitempty"`
}

// Missing is one event the inbox lacked.
type Missing struct {
	// ID is the event's id (GitHub: X-GitHub-Delivery), Type its type.
	ID   string `json:"id"`
	Type string `json:"type"`
	// At is when the provider created it (GitHub: first delivered it).
	At time.Time `json:"at"`
}

// Run lists the provider's events within params' window and claims each page
// in one transaction through the receiver's claim: an event already in the
// inbox is skipped, a missing one is inserted and its job enqueued. Each
// event is a delivery of its own whose body is the event's JSON as listed.
func Run(ctx context.Context, params *Params) (*Result, error) {
	res := &Result{}
	err := params.Fetcher.Fetch(ctx, Window{Since: params.Since, Until: params.Until}, func(events []Fetched) error {
		group := make([]*inboxstore.Delivery, len(events))
		for i, f := range events {
			group[i] = &inboxstore.Delivery{
				Source: params.Source, Provider: params.Provider, Body: f.Raw,
				Headers: map[string]string{HeaderReconciled: params.Provider + "-api"},
				Events:  []inboxstore.IncomingEvent{f.Event},
			}
		}
		results, err := params.Claimer.IngestGroup(ctx, group)
		if err != nil {
			return fmt.Errorf("reconcile: claim: %w", err)
		}
		res.Fetched += len(events)
		for i, r := range results {
			if r.New > 0 {
				res.Missing = append(res.Missing, Missing{ID: events[i].Event.ID, Type: events[i].Event.Type, At: events[i].At})
			}
			res.New += r.New
			res.Duplicates += r.Duplicates
			res.Twins += r.Twins
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	return res, nil
}
