// Package providerapi holds fakes of the provider APIs reconciliation
// calls: httptest handlers that speak each provider's documented protocol
// (authentication, paging, cursors, rate-limit answers), for the tests of
// internal/reconcile and of inboxctl reconcile. Failures makes a fake
// answer chosen requests with a 429 or a 5xx.
package providerapi

import "net/http"

// Failures answers the requests it names (by number, from 1) with a
// status: 429 with Retry-After 1, or a 5xx without.
type Failures map[int]int

// Answer writes the failure of request n and reports whether there was one.
func (f Failures) Answer(rw http.ResponseWriter, n int) bool {
	status, ok := f[n]
	if !ok {
		return false
	}
	if status == http.StatusTooManyRequests {
		rw.Header().Set("Retry-After", "1")
	}
	rw.WriteHeader(status)
	_, _ = rw.Write([]byte(`{}`))
	return true
}
