package provider

import "time"

// day is 24 hours; the windows below are whole days.
const day = 24 * time.Hour

// redeliveryWindows is, per provider, how long after the first delivery the
// provider may still deliver an event again, automatically or on an
// operator's request (/work/shared/providers.md gathers the sources):
//
//   - stripe 30 days: `stripe events resend` works for 30 days (the
//     Dashboard 15), and List Events returns 30 days (docs.stripe.com/webhooks,
//     process-undelivered-events); automatic retries stop after 3 days.
//   - adyen 30 days: after its quick retries, the endpoint's retry queue keeps
//     trying for up to 30 days.
//   - marqeta 17 days: 10 resends, each interval 4× the last from 4 s; the
//     last interval is just over 12 days, so the last resend comes about 16.2
//     days (4+16+…+4^10 s) after the first attempt.
//   - github 7 days: no automatic retries; manual redelivery for 3 days on
//     github.com, 7 on GitHub Enterprise Server.
//   - svix and standardwebhooks 4 days: the spec's schedule ends after
//     about 75 h 35 min (Svix's after about 27 h 35 min).
//   - square 3 days: retries for up to 72 h after the event.
//   - paddle 3 days: 60 retries over 3 days in live mode (exhausted
//     notifications can be replayed through Paddle's API later: set a
//     longer retention if you do that).
//   - shopify 2 days: 8 retries over 4 h today; older docs said 19 over 48 h.
//   - slack 1 day: 3 retries, the last about 5 minutes after the first.
//   - twilio 1 day: Twilio's own retries end within 4 h.
//   - hmac: unknown (a generic scheme); no window is enforced.
var redeliveryWindows = map[string]time.Duration{
	"stripe":           30 * day,
	"adyen":            30 * day,
	"marqeta":          17 * day,
	"github":           7 * day,
	"svix":             4 * day,
	"standardwebhooks": 4 * day,
	"square":           3 * day,
	"paddle":           3 * day,
	"shopify":          2 * day,
	"slack":            1 * day,
	"twilio":           1 * day,
}

// RedeliveryWindow returns how long after its first delivery the named
// provider may deliver an event again, and 0 when it is unknown (hmac, or
// an unknown name). An inbox row must outlive it: a redelivery after its row
// is pruned is claimed as a new event and processed twice.
func RedeliveryWindow(name string) time.Duration {
	return redeliveryWindows[name]
}
