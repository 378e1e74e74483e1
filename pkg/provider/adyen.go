package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

func init() {
	register("adyen", adapt(newAdyenVerifier), Preset{})
}

// adyenVerifier verifies Adyen standard (payments) webhook deliveries. Two
// checks, both of which must pass:
//
//   - HTTP Basic Auth against Config.BasicAuth, which is required;
//   - the hmacSignature of every item: each NotificationRequestItem's
//     additionalData.hmacSignature must be the standard base64 of
//     HMAC-SHA256, under any configured key (Config.Secrets, each the hex
//     HMAC key from Adyen's Customer Area, decoded), of
//     "pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success",
//     where an absent or null field is "", value is amount.value, an integer
//     of minor units, and success is the string as sent ("true"). Only the
//     canonical base64 spelling of a signature is accepted (see Shopify).
//
// If any item fails, the whole delivery is refused and nothing is stored. An
// item without hmacSignature is ErrSignatureMissing; a body whose items
// cannot be read (not JSON, no notificationItems, no item, more than 1000
// items, a signed field of the wrong JSON type) is ErrSignatureInvalid,
// because nothing in it could be authenticated.
//
// The signatures travel inside the body, so the body is parsed to find them
// before anything in it is trusted. The HMAC covers only those eight fields,
// as decoded from the JSON: the rest of an item (eventDate, reason,
// additionalData) and the JSON's spelling are vouched for by Basic Auth
// alone, and nothing carries a time, so the inbox's dedup key is what stops
// a replay.
//
// The body is {"live":"…","notificationItems":[{"NotificationRequestItem":{…}},…]}.
// Each item is one Event in body order, with ID "<eventCode>:<pspReference>",
// Type the eventCode and Payload the NotificationRequestItem object as sent
// (the whole body, with "live", is kept with every row). An authentic item
// that is not a jsonb-safe object, or whose eventCode or pspReference is
// empty or unusable, gets a ParseError; its ID is then
// "sha256:<hex of the NotificationRequestItem's bytes>" unless
// "<eventCode>:<pspReference>" is storable text of at most 1024 bytes (and
// was not read through invalid UTF-8).
//
// adyenVerifier implements Acknowledger: Adyen expects the body "[accepted]".
type adyenVerifier struct {
	basicAuth      []BasicAuth
	keys           keyring
	signaturesOnly bool // Reverify: Basic Auth is not checked
}

// newAdyenVerifier returns an Adyen verifier. Config.BasicAuth is required, and
// so is Config.Secrets: hex-encoded HMAC keys (64 hex digits in Adyen's
// Customer Area), any one of which may match. Config.Tolerance and Config.Now
// are not used.
func newAdyenVerifier(config *Config) (*adyenVerifier, error) {
	if err := config.validate(); err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	if len(config.Secrets) == 0 {
		return nil, errors.New("adyen: secrets: at least one hex-encoded HMAC key is required")
	}
	if len(config.BasicAuth) == 0 && !config.signaturesOnly {
		return nil, errors.New("adyen: basic_auth: Adyen webhooks need Basic Auth; configure at least one username and password")
	}
	keys, err := newDecodedKeyring(sha256.New, config.Secrets, sign.AdyenKey)
	if err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	return &adyenVerifier{basicAuth: config.BasicAuth, keys: keys, signaturesOnly: config.signaturesOnly}, nil
}

// Verify implements Verifier.
func (a *adyenVerifier) Verify(body []byte, header http.Header) (*Delivery, error) {
	if !a.signaturesOnly {
		if err := checkBasicAuth(header, a.basicAuth); err != nil {
			return nil, fmt.Errorf("adyen: %w", err)
		}
	}
	items, err := splitAdyen(body)
	if err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	for i, item := range items {
		if err := a.checkItem(item); err != nil {
			return nil, fmt.Errorf("adyen: item %d: %w", i, err)
		}
	}
	events := make([]Event, len(items))
	for i, item := range items {
		events[i] = item.event(i)
	}
	return &Delivery{Events: events, Headers: auditHeaders(header)}, nil
}

// checkItem checks an item's hmacSignature against every key.
func (a *adyenVerifier) checkItem(item adyenItem) error {
	if item.signature == "" {
		return fmt.Errorf("no additionalData.hmacSignature: %w", ErrSignatureMissing)
	}
	mac, ok := decodeBase64MAC(item.signature, sha256.Size)
	if !ok || !a.keys.matches([][]byte{mac}, []byte(item.signed)) {
		return fmt.Errorf("hmacSignature matches no configured key: %w", ErrSignatureInvalid)
	}
	return nil
}

// Ack implements Acknowledger with the reply Adyen requires.
func (a *adyenVerifier) Ack(inbox.ClaimCounts) Reply {
	return Reply{Status: http.StatusOK, ContentType: "text/plain", Body: []byte("[accepted]")}
}

// adyenItem is one NotificationRequestItem of a delivery.
type adyenItem struct {
	raw       []byte                     // the object as sent
	members   map[string]json.RawMessage // its members, decoded leniently
	signed    string                     // the string its hmacSignature covers
	signature string                     // additionalData.hmacSignature
}

// splitAdyen reads the items of a body. Its errors wrap ErrSignatureInvalid:
// an item that cannot be read cannot be authenticated.
func splitAdyen(body []byte) ([]adyenItem, error) {
	var envelope map[string]json.RawMessage
	if err := json.Unmarshal(body, &envelope); err != nil || envelope == nil {
		return nil, fmt.Errorf("body is not a JSON object: %w", ErrSignatureInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(envelope["notificationItems"]))
	if token, err := dec.Token(); err != nil || token != json.Delim('[') {
		return nil, fmt.Errorf("body has no notificationItems array: %w", ErrSignatureInvalid)
	}
	var items []adyenItem
	for dec.More() {
		if len(items) == maxBatchItems {
			return nil, fmt.Errorf("body has more than %d notificationItems: %w", maxBatchItems, ErrSignatureInvalid)
		}
		var wrapper map[string]json.RawMessage
		if err := dec.Decode(&wrapper); err != nil || wrapper["NotificationRequestItem"] == nil {
			return nil, fmt.Errorf("item %d has no NotificationRequestItem object: %w", len(items), ErrSignatureInvalid)
		}
		item, err := readAdyenItem(wrapper["NotificationRequestItem"])
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", len(items), err)
		}
		items = append(items, item)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("notificationItems is empty: %w", ErrSignatureInvalid)
	}
	return items, nil
}

// readAdyenItem reads a NotificationRequestItem's signed fields.
func readAdyenItem(raw []byte) (adyenItem, error) {
	item := adyenItem{raw: raw}
	if err := json.Unmarshal(raw, &item.members); err != nil || item.members == nil {
		return item, fmt.Errorf("NotificationRequestItem is not an object: %w", ErrSignatureInvalid)
	}
	signed, err := sign.AdyenSigned(item.members)
	if err != nil {
		return item, fmt.Errorf("%w: %w", err, ErrSignatureInvalid)
	}
	item.signed = signed
	var additional map[string]json.RawMessage
	if data := item.members["additionalData"]; !isNull(data) && json.Unmarshal(data, &additional) != nil {
		return item, fmt.Errorf("additionalData is not an object: %w", ErrSignatureInvalid)
	}
	if item.signature, err = optionalString(additional, "hmacSignature"); err != nil {
		return item, err
	}
	return item, nil
}

// optionalString returns the string member name of object, "" when it is
// absent or null, and an error for any other JSON type.
func optionalString(object map[string]json.RawMessage, name string) (string, error) {
	raw := object[name]
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s is not a string: %w", name, ErrSignatureInvalid)
	}
	return s, nil
}

// isNull reports an absent member or a JSON null.
func isNull(raw json.RawMessage) bool {
	return raw == nil || string(raw) == "null"
}

// event builds the event of an authentic item.
func (item adyenItem) event(index int) Event {
	p := parsePayload(item.raw)
	eventCode := payload{members: item.members}.str("eventCode")
	pspReference := payload{members: item.members}.str("pspReference")
	key := ""
	if eventCode != "" && pspReference != "" {
		key = eventCode + ":" + pspReference
	}
	return batchEvent(p, item.raw, "", key, storableKey(eventCode), "eventCode and pspReference",
		func() string { return fmt.Sprintf("item %d", index) })
}
