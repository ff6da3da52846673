package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// The Users, Keys and Account pages. Users and Keys are for admins
// (accessTable); Account is every signed-in person's own.

// userAction is what an admin can do to a person from the Users page. Its
// value is the name in URLs; the audit trail says user_<value>.
type userAction string

const (
	userRole    userAction = "role"
	userDisable userAction = "disable"
	userEnable  userAction = "enable"
	userRemove  userAction = "remove"
)

var userActions = []userAction{userRole, userDisable, userEnable, userRemove}

func (s *server) usersView(c *fiber.Ctx) (views.UsersView, error) {
	users, err := s.access.ListUsers(c.UserContext())
	if err != nil {
		return views.UsersView{}, err
	}
	me, _ := c.Locals(userKey).(auth.User)
	return views.UsersView{Users: users, Me: me.ID, Now: s.clock.Now(),
		Form: views.UserForm{Role: string(auth.RoleViewer), Errors: map[string]string{}}}, nil
}

// usersPage handles GET /users.
func (s *server) usersPage(c *fiber.Ctx) error {
	v, err := s.usersView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.UsersPage(s.chrome(c, "Users", "users", false), v))
}

// addUser handles POST /users: a person with a role, and a generated
// password (shown once) when none is given.
func (s *server) addUser(c *fiber.Ctx) error {
	email := strings.TrimSpace(c.FormValue("email"))
	role := auth.Role(c.FormValue("role"))
	password := c.FormValue("password")
	generated := password == ""
	if generated {
		password = auth.NewPassword()
	}
	u, err := s.access.AddUser(c.UserContext(), email, password, role)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		v, verr := s.usersView(c)
		if verr != nil {
			return verr
		}
		v.Form = views.UserForm{Email: email, Role: string(role), Errors: map[string]string{ve.Field: ve.Message}}
		if ve.Field == "" {
			v.Form.Message = ve.Message
		}
		return render(c, http.StatusUnprocessableEntity, views.UsersPanel(v))
	}
	if err != nil {
		return err
	}
	s.audit(c, "user_add", map[string]any{"email": u.Email, "role": u.Role})
	v, err := s.usersView(c)
	if err != nil {
		return err
	}
	if generated {
		v.Created = &views.CreatedUser{Email: u.Email, Password: password}
	} else {
		v.Notice = "Added " + u.Email + "."
	}
	toast(c, "Added "+u.Email+" as "+string(u.Role)+".", toastOK)
	return render(c, http.StatusOK, views.UsersPanel(v))
}

// userAction handles POST /users/{id}/{action}.
func (s *server) userAction(a userAction) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			toast(c, "That is not a user id.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		me, _ := c.Locals(userKey).(auth.User)
		if id == me.ID && a != userRole {
			toast(c, "You cannot disable or remove yourself; ask another admin.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		ctx := c.UserContext()
		var u auth.User
		details := map[string]any{}
		switch a {
		case userRole:
			role := auth.Role(c.FormValue("role"))
			u, err = s.access.SetUserRole(ctx, id, role)
			details["role"] = role
		case userDisable:
			u, err = s.access.DisableUser(ctx, id)
		case userEnable:
			u, err = s.access.EnableUser(ctx, id)
		case userRemove:
			u, err = s.access.RemoveUser(ctx, id)
		}
		var ve *jobs.ValidationError
		switch {
		case errors.As(err, &ve):
			toast(c, "Not done: "+ve.Message+".", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		case errors.Is(err, domain.ErrNotFound):
			toast(c, "No such user; someone may have removed them.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		case err != nil:
			return err
		}
		details["email"] = u.Email
		s.audit(c, "user_"+string(a), details)
		v, err := s.usersView(c)
		if err != nil {
			return err
		}
		v.Notice = map[userAction]string{userRole: u.Email + " is now " + string(u.Role) + ".",
			userDisable: "Disabled " + u.Email + "; their sessions have ended.", userEnable: "Enabled " + u.Email + ".",
			userRemove: "Removed " + u.Email + "."}[a]
		return render(c, http.StatusOK, views.UsersPanel(v))
	}
}

func (s *server) keysView(c *fiber.Ctx) (views.KeysView, error) {
	keys, err := s.access.ListAPIKeys(c.UserContext())
	if err != nil {
		return views.KeysView{}, err
	}
	return views.KeysView{Keys: keys, Now: s.clock.Now(), Form: views.KeyForm{Errors: map[string]string{}}}, nil
}

// keysPage handles GET /keys.
func (s *server) keysPage(c *fiber.Ctx) error {
	v, err := s.keysView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.KeysPage(s.chrome(c, "API keys", "keys", false), v))
}

// createKeyHTML handles POST /keys.
func (s *server) createKeyHTML(c *fiber.Ctx) error {
	name := strings.TrimSpace(c.FormValue("name"))
	var names []string
	for _, v := range c.Context().PostArgs().PeekMulti("scopes") {
		names = append(names, string(v))
	}
	queuesText := strings.TrimSpace(c.FormValue("queues"))
	queues := strings.FieldsFunc(queuesText, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	scopes, err := auth.ParseScopes(names)
	var k auth.APIKey
	var secret string
	if err == nil {
		k, secret, err = s.access.CreateAPIKey(c.UserContext(), auth.KeySpec{Name: name, Scopes: scopes, Queues: queues}, actorName(c))
	}
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		v, verr := s.keysView(c)
		if verr != nil {
			return verr
		}
		field := ve.Field
		if strings.HasPrefix(field, "queues[") {
			field = "queues"
		}
		v.Form = views.KeyForm{Name: name, Scopes: names, Queues: queuesText, Errors: map[string]string{field: ve.Message}}
		return render(c, http.StatusUnprocessableEntity, views.KeysPanel(v))
	}
	if err != nil {
		return err
	}
	s.audit(c, "key_create", keyAudit(k))
	v, err := s.keysView(c)
	if err != nil {
		return err
	}
	v.Secret = &views.ShownSecret{Name: k.Name, Secret: secret}
	toast(c, "Created the key "+k.Name+".", toastOK)
	return render(c, http.StatusOK, views.KeysPanel(v))
}

// revokeKeyHTML handles POST /keys/{id}/revoke.
func (s *server) revokeKeyHTML(c *fiber.Ctx) error {
	return s.keyActionHTML(c, func(id uuid.UUID) (views.KeysView, error) {
		k, err := s.access.RevokeAPIKey(c.UserContext(), id)
		if err != nil {
			return views.KeysView{}, err
		}
		s.audit(c, "key_revoke", map[string]any{"key": k.Name, "key_id": k.ID})
		v, err := s.keysView(c)
		v.Notice = "Revoked " + k.Name + "; its next request is refused."
		return v, err
	})
}

// rotateKeyHTML handles POST /keys/{id}/rotate, with the default window.
func (s *server) rotateKeyHTML(c *fiber.Ctx) error {
	return s.keyActionHTML(c, func(id uuid.UUID) (views.KeysView, error) {
		k, secret, err := s.access.RotateAPIKey(c.UserContext(), id, auth.DefaultRotationWindow)
		if err != nil {
			return views.KeysView{}, err
		}
		s.audit(c, "key_rotate", map[string]any{"key": k.Name, "key_id": k.ID, "window_seconds": int64(auth.DefaultRotationWindow.Seconds())})
		v, err := s.keysView(c)
		v.Secret = &views.ShownSecret{Name: k.Name, Secret: secret, OldValidUntil: k.PreviousExpiresAt}
		return v, err
	})
}

func (s *server) keyActionHTML(c *fiber.Ctx, do func(uuid.UUID) (views.KeysView, error)) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		toast(c, "That is not a key id.", toastBad)
		return c.SendStatus(http.StatusUnprocessableEntity)
	}
	v, err := do(id)
	var ve *jobs.ValidationError
	switch {
	case errors.As(err, &ve):
		toast(c, "Not done: "+ve.Message+".", toastBad)
		return c.SendStatus(http.StatusUnprocessableEntity)
	case errors.Is(err, domain.ErrNotFound):
		toast(c, "No such key.", toastBad)
		return c.SendStatus(http.StatusUnprocessableEntity)
	case errors.Is(err, auth.ErrKeyRevoked):
		toast(c, "Not done: this key is revoked already.", toastBad)
		return c.SendStatus(http.StatusConflict)
	case err != nil:
		return err
	}
	return render(c, http.StatusOK, views.KeysPanel(v))
}

func (s *server) accountForm(c *fiber.Ctx) views.AccountForm {
	u, _ := c.Locals(userKey).(auth.User)
	return views.AccountForm{Email: u.Email, Role: string(u.Role), Errors: map[string]string{}}
}

// accountPage handles GET /account.
func (s *server) accountPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.AccountPage(s.chrome(c, "Your account", "account", false), s.accountForm(c)))
}

// changePassword handles POST /account/password: the current password,
// then the new one twice. The person's other sessions end.
func (s *server) changePassword(c *fiber.Ctx) error {
	f := s.accountForm(c)
	u, _ := c.Locals(userKey).(auth.User)
	tok, _ := c.Locals(tokKey).(string)
	current, next := c.FormValue("current_password"), c.FormValue("new_password")
	if next != c.FormValue("confirm_password") {
		f.Errors["confirm_password"] = "does not match the new password"
		return render(c, http.StatusUnprocessableEntity, views.AccountFormPartial(f))
	}
	err := s.access.ChangePassword(c.UserContext(), u.ID, current, next, tok)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		field := ve.Field
		if field == "password" {
			field = "new_password"
		}
		f.Errors[field] = ve.Message
		return render(c, http.StatusUnprocessableEntity, views.AccountFormPartial(f))
	}
	if err != nil {
		return err
	}
	s.audit(c, "password_change", nil)
	f.Saved = true
	return render(c, http.StatusOK, views.AccountFormPartial(f))
}
