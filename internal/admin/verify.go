package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// VerifyResult is the outcome of re-verifying a row.
type VerifyResult string

// The outcomes of Verify. Only VerifyVerified proves the stored bytes
// authentic.
const (
	// VerifyVerified means the stored body and headers verify with a
	// secret the source lists now.
	VerifyVerified VerifyResult = "verified"
	// VerifyFailed means they do not: the reason says why (the secret is
	// no longer listed, the bytes were altered, the timestamp is outside
	// the tolerance as of the chosen time, the source is gone).
	VerifyFailed VerifyResult = "failed"
	// VerifyErased means the row's body and headers were erased
	// (payload_retention or a purge): it can no longer be verified.
	VerifyErased VerifyResult = "erased"
	// VerifyUnsigned means the row never had a signature to check: it was
	// listed from the provider's API by reconciliation, or its source signs
	// nothing that is stored (a marqeta source without secrets).
	VerifyUnsigned VerifyResult = "unsigned"
	// VerifyNotFound means no row has that id (inboxctl only; the API
	// answers 404).
	VerifyNotFound VerifyResult = "not_found"
)

// Verification is a row's re-verification. It names the secret that
// matched by its position in the source's list, never by its value or a
// hash of it.
type Verification struct {
	ID         int64     `json:"id"`
	Source     string    `json:"source,omitempty"`
	Provider   string    `json:"provider,omitempty"`
	EventID    string    `json:"event_id,omitempty"`
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// AsOf is the time signed timestamps were checked against, with the
	// source's tolerance: the row's received_at unless another was asked
	// for. Zero when no signature was checked.
	AsOf   time.Time    `json:"as_of,omitzero"`
	Result VerifyResult `json:"result"`
	// Reason says why a row is not verified.
	Reason string `json:"reason,omitempty"`
	// Secret is the 1-based position, in the source's secrets as
	// configured now, of the secret that signed the row; 0 when none did
	// alone. Secrets is how many the source lists.
	Secret  int `json:"secret,omitempty"`
	Secrets int `json:"secrets"`
	// MatchedSecret says the same in words: "secret 1 of 2 (current)",
	// "secret 2 of 2 (older)".
	MatchedSecret string `json:"matched_secret,omitempty"`
}

// ParseAt reads the time to verify as of: "received" or "" (each row's
// received_at, returned as the zero time), "now", or an RFC 3339 time.
func ParseAt(s string, now time.Time) (time.Time, error) {
	switch s {
	case "", "received":
		return time.Time{}, nil
	case "now":
		return now, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf(`at must be "received", "now" or an RFC 3339 time, not %q`, s)
	}
	return t, nil
}

// Verify runs the row's source's verifier again over the body and headers
// stored with it, with the secrets the source lists now, checking signed
// timestamps as of at (the zero time: the row's received_at, so that an
// old row does not fail for its age). It returns inbox.ErrNotFound for no
// such row; every other outcome is a Verification.
func (a *Admin) Verify(ctx context.Context, id int64, at time.Time) (*Verification, error) {
	d, err := a.inbox.StoredDelivery(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &Verification{ID: d.ID, Source: d.Source, Provider: d.Provider, EventID: d.EventID, ReceivedAt: d.ReceivedAt}
	switch {
	case d.ErasedAt != nil:
		v.Result, v.Reason = VerifyErased, "its body and headers were erased at "+d.ErasedAt.UTC().Format(time.RFC3339)+
			" (payload_retention or a purge): it can no longer be verified"
		return v, nil
	case d.Headers[reconcile.HeaderReconciled] != "":
		v.Result, v.Reason = VerifyUnsigned, "listed from the provider's API by reconciliation ("+
			d.Headers[reconcile.HeaderReconciled]+"), never delivered signed"
		return v, nil
	}
	config, reason := a.sourceConfig(d)
	if reason != "" {
		v.Result, v.Reason = VerifyFailed, reason
		return v, nil
	}
	v.Secrets = len(config.Secrets)
	if v.Secrets == 0 {
		v.Result, v.Reason = VerifyUnsigned, "the source has no signing secret, and its Basic Auth is never stored"
		return v, nil
	}
	v.AsOf = at
	if at.IsZero() {
		v.AsOf = d.ReceivedAt
	}
	config.Now = func() time.Time { return v.AsOf }
	index, err := provider.Reverify(d.Provider, config, d.Body, d.Headers)
	if err != nil {
		v.Result, v.Reason = VerifyFailed, failureReason(err)
		return v, nil
	}
	v.Result, v.Secret, v.MatchedSecret = VerifyVerified, index+1, secretLabel(index, v.Secrets)
	return v, nil
}

// failureReason says why Reverify failed: the verifier's refusal, or a
// verifier that cannot be built with this process's secrets (a worker need
// not hold them). Neither quotes a secret.
func failureReason(err error) string {
	if errors.Is(err, provider.ErrSignatureMissing) || errors.Is(err, provider.ErrSignatureInvalid) ||
		errors.Is(err, provider.ErrTimestampOutsideTolerance) {
		return err.Error()
	}
	return "the source's verifier cannot be built here (does this process have its secrets?): " + err.Error()
}

// VerifyEvent is Verify of source's event eventID.
func (a *Admin) VerifyEvent(ctx context.Context, source, eventID string, at time.Time) (*Verification, error) {
	info, err := a.inbox.Lookup(ctx, source, eventID)
	if err != nil {
		return nil, err
	}
	return a.Verify(ctx, info.ID, at)
}

// sourceConfig returns the verifier config of the row's source as
// configured now, or why there is none.
func (a *Admin) sourceConfig(d *inboxstore.StoredDelivery) (*provider.Config, string) {
	i := slices.IndexFunc(a.config.Sources, func(s Source) bool { return s.Name == d.Source })
	switch {
	case i < 0:
		return nil, fmt.Sprintf("source %q is no longer configured", d.Source)
	case a.config.Sources[i].Provider != d.Provider:
		return nil, fmt.Sprintf("the row was stored by provider %s; the source is now %s", d.Provider, a.config.Sources[i].Provider)
	case a.config.ProviderConfig == nil:
		return nil, "re-verification needs the sources' secrets (admin.Config.ProviderConfig)"
	}
	config, err := a.config.ProviderConfig(d.Source)
	if err != nil {
		return nil, "the source's secrets: " + err.Error()
	}
	return config, ""
}

// secretLabel names the index-th of n secrets by position: the first is the
// current one, which inboxctl send signs with; the others are older ones
// still listed during a rotation.
func secretLabel(index, n int) string {
	switch {
	case index < 0:
		return "more than one secret (items signed with different secrets)"
	case index == 0:
		return fmt.Sprintf("secret 1 of %d (current)", n)
	default:
		return fmt.Sprintf("secret %d of %d (older)", index+1, n)
	}
}
