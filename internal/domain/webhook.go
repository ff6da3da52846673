package domain

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
)

// Flint signs what it sends to other people's endpoints (jobs pushed to
// a queue's URL, alert webhooks) by the Standard Webhooks scheme
// (standardwebhooks.com), so receivers verify with that scheme's
// libraries in any language:
//
//	webhook-id:        a unique id of the message (a job's id for a push)
//	webhook-timestamp: Unix seconds when it was sent
//	webhook-signature: "v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">"
//
// keyed by the bytes a "whsec_" secret encodes in base64. While a secret
// is being rotated, each message carries one signature per live secret,
// separated by spaces, and a receiver accepts any that matches.

// Standard Webhooks headers.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// WebhookSecretPrefix starts every signing secret.
const WebhookSecretPrefix = "whsec_"

// NewWebhookSecret returns a new signing secret: "whsec_" and 32 random
// bytes in base64.
func NewWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// webhookKey returns the key a secret stands for: the bytes its base64
// encodes, or (for a secret set before Flint used this scheme that is not
// base64) its own bytes.
func webhookKey(secret string) []byte {
	s := strings.TrimPrefix(secret, WebhookSecretPrefix)
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) > 0 {
		return k
	}
	return []byte(secret)
}

// CheckWebhookSecret checks a secret someone chose: "whsec_" and base64 of
// 24 to 64 bytes, as the scheme's libraries expect.
func CheckWebhookSecret(field, secret string) error {
	s, ok := strings.CutPrefix(secret, WebhookSecretPrefix)
	k, err := base64.StdEncoding.DecodeString(s)
	if !ok || err != nil || len(k) < 24 || len(k) > 64 {
		return jobs.Invalid(field, "must be %s followed by the base64 of 24 to 64 random bytes (omit it and Flint makes one)", WebhookSecretPrefix)
	}
	return nil
}

// SignWebhook returns the webhook-signature header value of a message
// with id sent at t: one "v1,<signature>" per secret, space-separated.
func SignWebhook(secrets []string, id string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	for i, secret := range secrets {
		mac := hmac.New(sha256.New, webhookKey(secret))
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// WebhookHeaders sets the Standard Webhooks headers of a message on set
// (an http.Header's Set).
func WebhookHeaders(set func(key, value string), secrets []string, id string, t time.Time, body []byte) {
	set(HeaderWebhookID, id)
	set(HeaderWebhookTimestamp, strconv.FormatInt(t.Unix(), 10))
	set(HeaderWebhookSignature, SignWebhook(secrets, id, t, body))
}
