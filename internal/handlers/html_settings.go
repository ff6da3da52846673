// The settings form.

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

func settingsValues(st domain.Settings) map[string]string {
	out := map[string]string{}
	for k, raw := range st.Map() {
		if k == "alert_emails" {
			out[k] = strings.Join(st.AlertEmails, ", ")
			continue
		}
		out[k] = strings.Trim(string(raw), `"`)
	}
	return out
}

func (s *server) settingsForm(ctx context.Context, values map[string]string) (views.SettingsForm, error) {
	f := views.SettingsForm{Values: values, Errors: map[string]string{}}
	if f.Values == nil {
		st, err := s.settingsStore.GetSettings(ctx)
		if err != nil {
			return f, err
		}
		f.Values = settingsValues(st)
	}
	changes, err := s.settingsStore.ListSettingsChanges(ctx, 15)
	f.Changes = changes
	return f, err
}

func (s *server) settingsPage(c *fiber.Ctx) error {
	f, err := s.settingsForm(c.UserContext(), nil)
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "settings" {
		return render(c, http.StatusOK, views.SettingsFormPartial(f))
	}
	return render(c, http.StatusOK, views.SettingsPage(s.chrome(c, "Settings", "settings", true), f))
}

func (s *server) saveSettings(c *fiber.Ctx) error {
	ctx := c.UserContext()
	values := map[string]string{}
	patch := map[string]json.RawMessage{}
	for _, name := range domain.SettingNames() {
		v := strings.TrimSpace(c.FormValue(name))
		values[name] = v
		switch name {
		case "scheduler_strategy":
			patch[name], _ = json.Marshal(v)
		case "alert_emails":
			list := append([]string{}, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == ';' })...)
			patch[name], _ = json.Marshal(list)
		default:
			if v == "" {
				patch[name] = json.RawMessage("null")
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || strings.ContainsAny(v, "xXpP_") {
				f, ferr := s.settingsForm(ctx, values)
				if ferr != nil {
					return ferr
				}
				f.Errors[name] = "must be a number"
				return render(c, http.StatusUnprocessableEntity, views.SettingsFormPartial(f))
			}
			patch[name], _ = json.Marshal(n)
		}
	}
	st, changed, err := s.settingsStore.UpdateSettings(ctx, patch, dashActor(c))
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		f, ferr := s.settingsForm(ctx, values)
		if ferr != nil {
			return ferr
		}
		f.Errors[formField("", ve.Field)] = ve.Message
		return render(c, http.StatusUnprocessableEntity, views.SettingsFormPartial(f))
	}
	if err != nil {
		return err
	}
	s.settings.Set(st)
	if len(changed) > 0 {
		s.audit(c, "settings_change", settingsDiff(st, changed))
	}
	f, err := s.settingsForm(ctx, settingsValues(st))
	if err != nil {
		return err
	}
	f.Saved = changed
	if len(changed) == 0 {
		toast(c, "Nothing changed.", toastOK)
	} else {
		toast(c, "Settings saved.", toastOK)
	}
	return render(c, http.StatusOK, views.SettingsFormPartial(f))
}
