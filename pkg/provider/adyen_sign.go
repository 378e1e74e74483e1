package provider

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// This file signs Adyen notifications as Adyen does, for inboxctl send,
// demos, load generators and tests: the signatures travel inside the body,
// so signing rewrites the body rather than adding a header. Sign calls
// SignAdyenBody for the "adyen" provider.

// SignAdyenItem returns the additionalData.hmacSignature Adyen would put in
// item, a NotificationRequestItem's JSON object, with hexKey, the HMAC key
// as Adyen shows it (hex). Any hmacSignature item already has is ignored.
func SignAdyenItem(hexKey string, item []byte) (string, error) {
	key, err := decodeAdyenKey(hexKey)
	if err != nil {
		return "", fmt.Errorf("adyen: %w", err)
	}
	parsed, err := readAdyenItem(item)
	if err != nil {
		return "", fmt.Errorf("adyen: %w", err)
	}
	return base64.StdEncoding.EncodeToString(hmacSHA256(key, []byte(parsed.signed))), nil
}

// SignAdyenBody returns body, an Adyen notification
// ({"live":…,"notificationItems":[{"NotificationRequestItem":{…}},…]}),
// with every item's additionalData.hmacSignature set as Adyen would set it
// with hexKey. The JSON is re-encoded (members sorted, compacted), which
// changes nothing Adyen signs. Adyen also requires Basic Auth, which
// SignHeaders adds from SignParams.Config; sign the body here first, or let
// Sign do both. It is for inboxctl send, demos, load generators and tests.
func SignAdyenBody(hexKey string, body []byte) ([]byte, error) {
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
	signature, err := SignAdyenItem(hexKey, item)
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
