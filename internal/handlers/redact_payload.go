package handlers

import (
	"bytes"
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// An http_request job's payload carries the request's headers, and those
// often carry credentials (Authorization: Bearer …, Cookie, X-Api-Key).
// Below admin, every view of a job (the API, the job page and its live
// part, the raw download, the forms that copy a payload) shows such a
// header's value as logs.Redacted, and the URL scrubbed as errors are.
// A replay that leaves a redacted value as it is keeps the stored one
// (restoreRedacted).

// payloadForCaller is j's payload as the caller may see it.
func payloadForCaller(c *fiber.Ctx, j *jobs.Job) json.RawMessage {
	if j.Type != jobs.TypeHTTPRequest || seesSecrets(c) {
		return j.Payload
	}
	return redactHTTPPayload(j.Payload)
}

// jobForCaller is j with its payload as the caller may see it (a copy
// when it differs).
func jobForCaller(c *fiber.Ctx, j *jobs.Job) *jobs.Job {
	p := payloadForCaller(c, j)
	if bytes.Equal(p, j.Payload) {
		return j
	}
	cp := *j
	cp.Payload = p
	return &cp
}

// redactHTTPPayload hides credential-bearing header values and URL
// secrets of an http_request payload; anything it cannot read comes back
// as it is.
func redactHTTPPayload(raw json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil {
		return raw
	}
	changed := false
	var headers map[string]any
	if h, ok := p["headers"]; ok && json.Unmarshal(h, &headers) == nil {
		for name := range headers {
			if logs.IsSecretKey(name) { // Authorization, Cookie, X-Api-Key, …
				headers[name], changed = logs.Redacted, true
			}
		}
		if changed {
			p["headers"], _ = json.Marshal(headers)
		}
	}
	var u string
	if v, ok := p["url"]; ok && json.Unmarshal(v, &u) == nil {
		if s := logs.Scrub(u); s != u {
			p["url"], _ = json.Marshal(s)
			changed = true
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(p)
	if err != nil {
		return raw
	}
	return out
}

// restoreRedacted puts back, in an edited http_request payload, the
// stored value of every header still shown as logs.Redacted, and the
// stored URL when the scrubbed one was left as shown, so a replay by
// someone who never saw the credentials keeps them.
func restoreRedacted(stored, edited json.RawMessage) json.RawMessage {
	var was, now map[string]json.RawMessage
	if json.Unmarshal(stored, &was) != nil || json.Unmarshal(edited, &now) != nil {
		return edited
	}
	var oldH map[string]any
	var newH map[string]any
	_ = json.Unmarshal(was["headers"], &oldH)
	_ = json.Unmarshal(now["headers"], &newH)
	changed := false
	var oldURL, newURL string
	if json.Unmarshal(was["url"], &oldURL) == nil && json.Unmarshal(now["url"], &newURL) == nil &&
		newURL != oldURL && newURL == logs.Scrub(oldURL) {
		now["url"], changed = was["url"], true
	}
	for name, v := range newH {
		if v == logs.Redacted && oldH[name] != nil {
			newH[name], changed = oldH[name], true
		}
	}
	if !changed {
		return edited
	}
	if newH != nil {
		now["headers"], _ = json.Marshal(newH)
	}
	out, err := json.Marshal(now)
	if err != nil {
		return edited
	}
	return out
}

// redactReplayDetails redacts the payloads an edit and replay recorded
// (payload_before, payload_after) as an http_request payload is redacted;
// other payloads hold no headers or URL to redact and come back as they
// are.
func redactReplayDetails(details json.RawMessage) json.RawMessage {
	var d map[string]json.RawMessage
	if json.Unmarshal(details, &d) != nil {
		return details
	}
	changed := false
	for _, k := range []string{"payload_before", "payload_after"} {
		if p, ok := d[k]; ok {
			if r := redactHTTPPayload(p); !bytes.Equal(r, p) {
				d[k], changed = r, true
			}
		}
	}
	if !changed {
		return details
	}
	out, err := json.Marshal(d)
	if err != nil {
		return details
	}
	return out
}
