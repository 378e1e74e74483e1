package provider

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// Vector from /work/shared/providers.md §11: PaddleHQ/paddle-go-sdk
// webhook_verifier_test.go. Its timestamp is from 2024, so it runs with a
// clock pinned at the signing time.
const (
	paddleVectorSecret    = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	paddleVectorSignature = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
	paddleVectorBody      = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
)

var paddleVectorTime = time.Unix(1710929255, 0)

func init() {
	registerConformance(paddleSigner)
}

func paddleSigner() signer {
	return signer{
		provider:      "paddle",
		secrets:       [2]string{"pdl_ntfset_01old_conformance", "pdl_ntfset_01new_conformance"},
		unknownSecret: "pdl_ntfset_01unknown_conformance",
		body: func(ids ...string) []byte {
			return []byte(`{"data":{"id":"txn_1","status":"completed"},"event_id":"` + ids[0] +
				`","event_type":"order.created","occurred_at":"2026-11-29T10:00:00Z","notification_id":"ntf_1"}`)
		},
		sign: func(t *testing.T, secret string, at time.Time, id string, body []byte) request {
			ts := strconv.FormatInt(at.Unix(), 10)
			mac := referenceHMAC([]byte(secret), []byte(ts+":"+string(body)))
			return request{header: paddleHeader("ts=" + ts + ";h1=" + hex.EncodeToString(mac)), body: body}
		},
		want: wantOne("order.created"),
		signature: func(r request) string {
			_, encoded, _ := strings.Cut(r.header.Get("Paddle-Signature"), ";h1=")
			return encoded
		},
		setSignature: func(r request, encoded string) request {
			out := r.clone()
			ts, _, _ := strings.Cut(r.header.Get("Paddle-Signature"), ";h1=")
			out.header.Set("Paddle-Signature", ts+";h1="+encoded)
			return out
		},
		decode:          hex.DecodeString,
		encode:          hex.EncodeToString,
		signatureHeader: "Paddle-Signature",
		wrongPrefixes: func(r request) []request {
			var out []request
			for _, version := range []string{"h0", "h2", "H1", "h1 ", "", "v1"} {
				copied := r.clone()
				copied.header.Set("Paddle-Signature",
					strings.Replace(r.header.Get("Paddle-Signature"), ";h1=", ";"+version+"=", 1))
				out = append(out, copied)
			}
			return out
		},
		timestamped: true,
		idFromBody:  true,
	}
}

// paddleHeader returns a Paddle delivery's headers.
func paddleHeader(signature string) http.Header {
	header := http.Header{}
	header.Set("Paddle-Signature", signature)
	header.Set("Paddle-Version", "1")
	return header
}

func newTestPaddle(t testing.TB, now time.Time, secrets ...string) *paddleVerifier {
	t.Helper()
	paddle, err := newPaddleVerifier(pinnedConfig(now, secrets...))
	require.NoError(t, err)
	return paddle
}

func TestPaddle(t *testing.T) {
	t.Parallel()

	t.Run("OfficialVectorVerifies", func(t *testing.T) {
		t.Parallel()
		delivery, err := newTestPaddle(t, paddleVectorTime, paddleVectorSecret).Verify([]byte(paddleVectorBody),
			paddleHeader(paddleVectorSignature))
		require.NoError(t, err)
		require.Equal(t, Event{ID: "evt_01hsdn97563968dy0szkmgjwh3", Type: "price.created", Payload: []byte(paddleVectorBody)},
			requireOneEvent(t, delivery))
		require.Equal(t, map[string]string{"Paddle-Signature": paddleVectorSignature}, delivery.Headers)
	})

	t.Run("SignPaddleReproducesTheOfficialVector", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, paddleVectorSignature, sign.Paddle(paddleVectorSecret, paddleVectorTime, []byte(paddleVectorBody)))
		require.Equal(t, strings.TrimPrefix(paddleVectorSignature, "ts=1710929255;h1="),
			hex.EncodeToString(referenceHMAC([]byte(paddleVectorSecret), []byte("1710929255:"+paddleVectorBody))))
	})

	t.Run("OfficialNegativesAreRejected", func(t *testing.T) {
		t.Parallel()
		// The SDK test's "invalid payload", "invalid signature format",
		// "invalid secret key" and "missing signature".
		paddle := newTestPaddle(t, paddleVectorTime, paddleVectorSecret)
		_, err := paddle.Verify([]byte(`{}`), paddleHeader(paddleVectorSignature))
		requireRejected(t, err, ErrSignatureInvalid, paddleVectorSecret)
		_, err = paddle.Verify([]byte(paddleVectorBody), paddleHeader("ts=x;h1=y"))
		requireRejected(t, err, ErrSignatureInvalid, paddleVectorSecret)
		_, err = newTestPaddle(t, paddleVectorTime, "abc").Verify([]byte(paddleVectorBody), paddleHeader(paddleVectorSignature))
		requireRejected(t, err, ErrSignatureInvalid, "abc")
		_, err = paddle.Verify([]byte(paddleVectorBody), http.Header{})
		requireRejected(t, err, ErrSignatureMissing, paddleVectorSecret)
	})

	t.Run("OfficialVectorIsStaleOnTheWallClock", func(t *testing.T) {
		t.Parallel()
		paddle, err := newPaddleVerifier(&Config{Secrets: []string{paddleVectorSecret}})
		require.NoError(t, err)
		_, err = paddle.Verify([]byte(paddleVectorBody), paddleHeader(paddleVectorSignature))
		requireRejected(t, err, ErrTimestampOutsideTolerance, paddleVectorSecret)
	})

	t.Run("AnyH1OfSeveralMatchesInAnyOrder", func(t *testing.T) {
		t.Parallel()
		paddle := newTestPaddle(t, paddleVectorTime, paddleVectorSecret)
		genuine := strings.TrimPrefix(paddleVectorSignature, "ts=1710929255;h1=")
		other := strings.Repeat("ab", 32)
		for _, value := range []string{
			"ts=1710929255;h1=" + other + ";h1=" + genuine,
			"h1=" + genuine + ";ts=1710929255",
			"ts=1710929255;h1=" + strings.ToUpper(genuine) + ";h1=" + genuine + ";x-future=1",
		} {
			_, err := paddle.Verify([]byte(paddleVectorBody), paddleHeader(value))
			require.NoError(t, err, value)
		}
	})

	t.Run("MalformedHeadersAreInvalid", func(t *testing.T) {
		t.Parallel()
		paddle := newTestPaddle(t, paddleVectorTime, paddleVectorSecret)
		genuine := strings.TrimPrefix(paddleVectorSignature, "ts=1710929255;h1=")
		for _, value := range []string{
			"ts=1710929255", // no h1
			"h1=" + genuine, // no ts
			"ts=1710929255;ts=1710929255;h1=" + genuine,                  // two ts
			"ts=01710929255;h1=" + genuine,                               // not canonical
			"ts=1710929255;h1=" + strings.ToUpper(genuine),               // only lowercase hex
			"ts=1710929255,h1=" + genuine,                                // Stripe's separator
			"ts=1710929255; h1=" + genuine,                               // a space
			"ts=1710929255;h1=" + genuine + "=",                          // not key=value
			"ts=1710929256;h1=" + genuine,                                // another ts
			"ts=1710929255;h1=" + genuine[:62],                           // short
			"ts=1710929255;h1=" + genuine + ";;",                         // an empty field
			"ts=1710929255;h1=" + genuine + ";h1=" + genuine[:62] + "zz", // the good one is still there
		} {
			_, err := paddle.Verify([]byte(paddleVectorBody), paddleHeader(value))
			if strings.HasSuffix(value, "zz") {
				require.NoError(t, err, value)
				continue
			}
			requireRejected(t, err, ErrSignatureInvalid, paddleVectorSecret)
		}
	})

	t.Run("ToleranceIsConfigurable", func(t *testing.T) {
		t.Parallel()
		paddle, err := newPaddleVerifier(&Config{
			Secrets: []string{paddleVectorSecret}, Tolerance: 5 * time.Second,
			Now: func() time.Time { return paddleVectorTime.Add(6 * time.Second) },
		})
		require.NoError(t, err)
		_, err = paddle.Verify([]byte(paddleVectorBody), paddleHeader(paddleVectorSignature))
		requireRejected(t, err, ErrTimestampOutsideTolerance, paddleVectorSecret)
	})
}

// FuzzPaddleVerify checks that Verify never panics, that every refusal
// wraps a sentinel without quoting the secret, and that whatever verifies
// carries an h1 equal to the genuine signature of its ts.
func FuzzPaddleVerify(f *testing.F) {
	f.Add([]byte(paddleVectorBody), paddleVectorSignature)
	f.Add([]byte(paddleVectorBody), "h1=x;"+paddleVectorSignature+";h1=y")
	f.Add([]byte(paddleVectorBody), "ts=x;h1=y")
	f.Add([]byte(`{}`), paddleVectorSignature)
	f.Add([]byte{}, sign.Paddle(paddleVectorSecret, paddleVectorTime, nil))
	f.Add([]byte(`{"event_id":"\ud800"}`), sign.Paddle(paddleVectorSecret, paddleVectorTime, []byte(`{"event_id":"\ud800"}`)))
	paddle := newTestPaddle(f, paddleVectorTime, paddleVectorSecret)

	f.Fuzz(func(t *testing.T, body []byte, signature string) {
		delivery, err := paddle.Verify(body, paddleHeader(signature))
		if err != nil {
			requireNotAuthentic(t, err)
			require.NotContains(t, err.Error(), paddleVectorSecret)
			return
		}
		var ts string
		var h1s []string
		for field := range strings.SplitSeq(signature, ";") {
			key, val, _ := strings.Cut(field, "=")
			switch key {
			case "ts":
				ts = val
			case "h1":
				h1s = append(h1s, val)
			}
		}
		require.Contains(t, h1s, hex.EncodeToString(referenceHMAC([]byte(paddleVectorSecret), []byte(ts+":"+string(body)))))
		event := requireOneEvent(t, delivery)
		if event.ParseError == nil {
			require.Equal(t, body, event.Payload)
		} else {
			require.Nil(t, event.Payload)
		}
	})
}
