package provider_test

import (
	"net/http"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// init gives the package's own tests internal/webhook, which they cannot
// import (it imports provider); see webhook_hook_test.go.
func init() {
	provider.Sign = func(p *provider.SignParams) (*provider.Signed, error) {
		signed, err := webhook.Sign((*webhook.Params)(p))
		if err != nil {
			return nil, err
		}
		return &provider.Signed{Header: signed.Header, Body: signed.Body}, nil
	}
	provider.SignHeaders = func(p *provider.SignParams) (http.Header, error) {
		return webhook.Headers((*webhook.Params)(p))
	}
	provider.SignHMAC = webhook.HMACHeaders
	provider.SetSignErrors(webhook.ErrEventIDRequired, webhook.ErrEventTypeRequired)
}
