package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
)

// keyCreateRequest is the body of POST /api/v1/keys.
type keyCreateRequest struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	Queues []string `json:"queues"`
}

// keyWithSecret is a key as created or rotated: the only time its secret
// is shown.
type keyWithSecret struct {
	auth.APIKey
	Secret string `json:"secret"`
}

// keyRotateRequest is the optional body of POST /api/v1/keys/{id}/rotate.
type keyRotateRequest struct {
	WindowSeconds *int64 `json:"window_seconds"`
}

func keyID(c *fiber.Ctx) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return uuid.Nil, badRequest("invalid_id", "id", "the key id in the path must be a UUID")
	}
	return id, nil
}

// createKey handles POST /api/v1/keys: 201 with the secret, shown once.
func (s *server) createKey(c *fiber.Ctx) error {
	var req keyCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	scopes, err := auth.ParseScopes(req.Scopes)
	if err != nil {
		return err
	}
	k, secret, err := s.access.CreateAPIKey(c.UserContext(), auth.KeySpec{Name: req.Name, Scopes: scopes, Queues: req.Queues}, actorName(c))
	if err != nil {
		return err
	}
	s.audit(c, "key_create", keyAudit(k))
	return c.Status(http.StatusCreated).JSON(keyWithSecret{APIKey: k, Secret: secret})
}

// keyAudit is what the audit trail records of a new key.
func keyAudit(k auth.APIKey) map[string]any {
	d := map[string]any{"key": k.Name, "key_id": k.ID, "scopes": k.Scopes}
	if k.Queues != nil {
		d["queues"] = k.Queues
	}
	return d
}

// listKeys handles GET /api/v1/keys: every key without its secret.
func (s *server) listKeys(c *fiber.Ctx) error {
	keys, err := s.access.ListAPIKeys(c.UserContext())
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []auth.APIKey{}
	}
	return c.JSON(fiber.Map{"keys": keys})
}

// revokeKey handles DELETE /api/v1/keys/{id}: the key stops working on the
// next request. A key revoked before is a 409, and no audit entry.
func (s *server) revokeKey(c *fiber.Ctx) error {
	id, err := keyID(c)
	if err != nil {
		return err
	}
	k, err := s.access.RevokeAPIKey(c.UserContext(), id)
	if errors.Is(err, auth.ErrKeyRevoked) {
		return &apiError{Status: http.StatusConflict, Code: "already_revoked",
			Message: "this key is revoked already; nothing changed"}
	}
	if err != nil {
		return err
	}
	s.audit(c, "key_revoke", map[string]any{"key": k.Name, "key_id": k.ID})
	return c.JSON(k)
}

// rotateKey handles POST /api/v1/keys/{id}/rotate: a new secret, the old
// one valid for window_seconds more (default a day).
func (s *server) rotateKey(c *fiber.Ctx) error {
	id, err := keyID(c)
	if err != nil {
		return err
	}
	var req keyRotateRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	window := auth.DefaultRotationWindow
	if req.WindowSeconds != nil {
		if *req.WindowSeconds < 0 || *req.WindowSeconds > int64(auth.MaxRotationWindow.Seconds()) {
			return invalid("window_seconds", "must be between 0 and 2592000 (30 days)")
		}
		window = time.Duration(*req.WindowSeconds) * time.Second
	}
	k, secret, err := s.access.RotateAPIKey(c.UserContext(), id, window)
	if err != nil {
		return err
	}
	s.audit(c, "key_rotate", map[string]any{"key": k.Name, "key_id": k.ID, "window_seconds": int64(window.Seconds())})
	return c.JSON(keyWithSecret{APIKey: k, Secret: secret})
}

// actorName is who makes this request, without the address: an email or
// key:<name>.
func actorName(c *fiber.Ctx) string {
	if p, ok := principalOf(c); ok {
		return p.actor
	}
	return "unknown"
}
