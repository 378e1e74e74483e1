package provider_test

import (
	"net/http"

	"github.com/hookinbox/hookinbox/internal/send"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// init gives the package's own tests internal/send, which they cannot
// import (it imports provider); see send_hook_test.go.
func init() {
	provider.Sign = func(p *provider.SignParams) (*provider.Signed, error) {
		signed, err := send.Sign((*send.Params)(p))
		if err != nil {
			return nil, err
		}
		return &provider.Signed{Header: signed.Header, Body: signed.Body}, nil
	}
	provider.SignHeaders = func(p *provider.SignParams) (http.Header, error) {
		return send.Headers((*send.Params)(p))
	}
	provider.SignHMAC = send.HMACHeaders
	provider.ErrEventIDRequired = send.ErrEventIDRequired
	provider.ErrEventTypeRequired = send.ErrEventTypeRequired
}
