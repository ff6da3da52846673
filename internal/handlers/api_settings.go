package handlers

import (
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
)

// getSettings handles GET /api/v1/settings.
func (s *server) getSettings(c *fiber.Ctx) error {
	st, err := s.settingsStore.GetSettings(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(st)
}

// patchSettings handles PATCH /api/v1/settings: a partial update, validated
// as a whole, recorded with who made it, effective in every process.
func (s *server) patchSettings(c *fiber.Ctx) error {
	var patch map[string]json.RawMessage
	if err := decodeJSON(c, &patch); err != nil {
		return err
	}
	st, changed, err := s.settingsStore.UpdateSettings(c.UserContext(), patch, actor(c))
	if err != nil {
		return err
	}
	s.settings.Set(st)
	if changed == nil {
		changed = []string{}
	}
	if len(changed) > 0 {
		s.audit(c, "settings_change", settingsDiff(st, changed))
	}
	return c.JSON(fiber.Map{"settings": st, "changed": changed})
}

// listSettingsChanges handles GET /api/v1/settings/changes.
func (s *server) listSettingsChanges(c *fiber.Ctx) error {
	limit, err := limitQuery(c, 50)
	if err != nil {
		return err
	}
	changes, err := s.settingsStore.ListSettingsChanges(c.UserContext(), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"changes": changes})
}

// settingsDiff is the audit detail of a settings change: the new values.
func settingsDiff(st domain.Settings, changed []string) map[string]json.RawMessage {
	all := st.Map()
	out := map[string]json.RawMessage{}
	for _, k := range changed {
		out[k] = all[k]
	}
	return out
}

// actor names who made a request, for the record: the API key's name
// (key:<name>), with the client address.
func actor(c *fiber.Ctx) string {
	return actorName(c) + "@" + clientAddr(c)
}
