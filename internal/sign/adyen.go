package sign

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Adyen's signatures travel inside the body, so signing rewrites the body
// rather than adding a header; webhook.Sign calls AdyenBody for the "adyen"
// provider and adds the Basic Auth Adyen also requires.

// AdyenKey decodes a hex HMAC key. Its error never quotes the key.
func AdyenKey(hexKey string) ([]byte, error) {
	key, err := hex.DecodeString(hexKey)
	if err != nil || len(key) == 0 {
		return nil, errors.New("not a hex-encoded HMAC key")
	}
	return key, nil
}

// AdyenSigned returns what the hmacSignature of a NotificationRequestItem
// with members covers:
// "pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success",
// where an absent or null field is "" and value is amount.value. An error
// names the field of the wrong JSON type.
func AdyenSigned(members map[string]json.RawMessage) (string, error) {
	var amount map[string]json.RawMessage
	if raw := members["amount"]; !isNull(raw) && json.Unmarshal(raw, &amount) != nil {
		return "", errors.New("amount is not an object")
	}
	value := ""
	if raw := amount["value"]; !isNull(raw) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return "", errors.New("amount.value is not an integer of minor units")
		}
		value = strconv.FormatInt(n, 10)
	}
	var err error
	field := func(object map[string]json.RawMessage, name string) string {
		s, fieldErr := optionalString(object, name)
		if err == nil {
			err = fieldErr
		}
		return s
	}
	fields := []string{
		field(members, "pspReference"), field(members, "originalReference"),
		field(members, "merchantAccountCode"), field(members, "merchantReference"),
		value, field(amount, "currency"), field(members, "eventCode"), field(members, "success"),
	}
	if err != nil {
		return "", err
	}
	return strings.Join(fields, ":"), nil
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
		return "", fmt.Errorf("%s is not a string", name)
	}
	return s, nil
}

// isNull reports an absent member or a JSON null.
func isNull(raw json.RawMessage) bool {
	return raw == nil || string(raw) == "null"
}

// AdyenItem returns the additionalData.hmacSignature Adyen would put in
// item, a NotificationRequestItem's JSON object, with hexKey, the HMAC key
// as Adyen shows it (hex). Any hmacSignature item already has is ignored.
func AdyenItem(hexKey string, item []byte) (string, error) {
	key, err := AdyenKey(hexKey)
	if err != nil {
		return "", fmt.Errorf("adyen: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(item, &members); err != nil || members == nil {
		return "", errors.New("adyen: NotificationRequestItem is not an object")
	}
	var additional map[string]json.RawMessage
	if data := members["additionalData"]; !isNull(data) && json.Unmarshal(data, &additional) != nil {
		return "", errors.New("adyen: additionalData is not an object")
	}
	if _, err := optionalString(additional, "hmacSignature"); err != nil {
		return "", fmt.Errorf("adyen: %w", err)
	}
	signed, err := AdyenSigned(members)
	if err != nil {
		return "", fmt.Errorf("adyen: %w", err)
	}
	return base64.StdEncoding.EncodeToString(macSHA256(key, []byte(signed))), nil
}

// AdyenBody returns body, an Adyen notification
// ({"live":…,"notificationItems":[{"NotificationRequestItem":{…}},…]}),
// with every item's additionalData.hmacSignature set as Adyen would set it
// with hexKey. The JSON is re-encoded (members sorted, compacted), which
// changes nothing Adyen signs. Adyen also requires Basic Auth, which
// webhook.Headers adds from the source's config; sign the body here first, or
// let webhook.Sign do both.
func AdyenBody(hexKey string, body []byte) ([]byte, error) {
	var envelope map[string]json.RawMessage
	var wrappers []map[string]json.RawMessage
	if err := json.Unmarshal(body, &envelope); err != nil {
		return nil, fmt.Errorf("adyen: body is not a JSON object: %w", err)
	}
	if err := json.Unmarshal(envelope["notificationItems"], &wrappers); err != nil {
		return nil, fmt.Errorf("adyen: notificationItems is not an array of objects: %w", err)
	}
	for i, wrapper := range wrappers {
		signed, err := signAdyenItemJSON(hexKey, wrapper["NotificationRequestItem"])
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		wrapper["NotificationRequestItem"] = signed
	}
	items, err := json.Marshal(wrappers)
	if err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	envelope["notificationItems"] = items
	return json.Marshal(envelope)
}

// signAdyenItemJSON returns item with its hmacSignature set.
func signAdyenItemJSON(hexKey string, item json.RawMessage) (json.RawMessage, error) {
	signature, err := AdyenItem(hexKey, item)
	if err != nil {
		return nil, err
	}
	var members, additional map[string]json.RawMessage
	if err := json.Unmarshal(item, &members); err != nil {
		return nil, fmt.Errorf("adyen: %w", err)
	}
	if data := members["additionalData"]; !isNull(data) {
		if err := json.Unmarshal(data, &additional); err != nil {
			return nil, fmt.Errorf("adyen: %w", err)
		}
	}
	if additional == nil {
		additional = map[string]json.RawMessage{}
	}
	if additional["hmacSignature"], err = json.Marshal(signature); err != nil {
		return nil, err
	}
	if members["additionalData"], err = json.Marshal(additional); err != nil {
		return nil, err
	}
	return json.Marshal(members)
}
