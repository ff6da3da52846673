package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
	"flint/views"
)

// DashboardStore is what the dashboard needs beyond the API's Store.
type DashboardStore interface {
	SessionStore
	CappedCounts(ctx context.Context, states []jobs.State, limit int64) ([]jobs.StateCount, error)
	RecentFailures(ctx context.Context, limit int) ([]jobs.Failure, error)
	Queues(ctx context.Context) ([]string, error)
	Throughput(ctx context.Context) ([]jobs.ThroughputBucket, error)
}

// countCap bounds every count the dashboard shows, so no page ever counts a
// whole million-row table.
const countCap = 100_000

// chrome builds the page frame for the signed-in user.
// chrome is the frame of a page; live pages show the live indicator.
func (s *server) chrome(c *fiber.Ctx, title, nav string, live bool) views.Chrome {
	u, _ := c.Locals(userKey).(jobs.User)
	csrf, _ := c.Locals(csrfKey).(string)
	return views.Chrome{Title: title, Nav: nav, User: u.Email, CSRF: csrf, MailURL: s.mailURL, Now: s.clock.Now(), Live: live}
}

// dashActor names the signed-in user for records of what they changed.
func dashActor(c *fiber.Ctx) string {
	u, _ := c.Locals(userKey).(jobs.User)
	return u.Email + "@" + c.IP()
}

// --- login ---

func (s *server) loginPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.LoginPage(s.loginToken(c), "", loginRedirectTarget(c.Query("next")), ""))
}

// loginToken returns the login form's CSRF token, setting its cookie.
func (s *server) loginToken(c *fiber.Ctx) string {
	if tok := c.Cookies(loginCookie); len(tok) >= 32 {
		return tok
	}
	tok := randomToken()
	c.Cookie(&fiber.Cookie{Name: loginCookie, Value: tok, Path: "/login", HTTPOnly: true, Secure: s.sessions.secure,
		SameSite: fiber.CookieSameSiteStrictMode, MaxAge: 3600})
	return tok
}

func (s *server) login(c *fiber.Ctx) error {
	email := strings.TrimSpace(c.FormValue("email"))
	password := c.FormValue("password")
	next := loginRedirectTarget(c.FormValue("next"))
	cookieTok := c.Cookies(loginCookie)
	if cookieTok == "" || !equalTokens(cookieTok, c.FormValue("_csrf")) {
		return render(c, http.StatusForbidden, views.LoginPage(s.loginToken(c), email, next, "The form expired. Please sign in again."))
	}
	if len(email) > 254 || len(password) > 200 || !jobs.CleanText(email) {
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(cookieTok, "", next, "Enter a valid email address and password."))
	}
	ip := c.IP()
	if !s.sessions.limit.allowed(ip, email) {
		c.Set("Retry-After", strconv.Itoa(int(loginWindow.Seconds())))
		return render(c, http.StatusTooManyRequests, views.LoginPage(cookieTok, email, next, "Too many failed sign-ins. Wait 15 minutes and try again."))
	}
	u, err := s.sessions.db.Authenticate(c.UserContext(), email, password)
	if errors.Is(err, jobs.ErrBadLogin) {
		s.sessions.limit.fail(ip, email)
		s.logger.WarnContext(c.UserContext(), "failed sign-in", "component", "auth", "ip", ip)
		return render(c, http.StatusUnauthorized, views.LoginPage(cookieTok, email, next, "Wrong email or password."))
	}
	if err != nil {
		return err
	}
	s.sessions.limit.succeed(email)
	token := randomToken()
	if err := s.sessions.db.CreateSession(c.UserContext(), u.ID, token, randomToken(), sessionTTL, ip, c.Get("User-Agent")); err != nil {
		return err
	}
	if err := s.sessions.save(c, token); err != nil {
		return err
	}
	return c.Redirect(next, http.StatusSeeOther)
}

func (s *server) logout(c *fiber.Ctx) error {
	if tok, _ := c.Locals(tokKey).(string); tok != "" {
		if err := s.sessions.db.DeleteSession(c.UserContext(), tok); err != nil {
			return err
		}
	}
	if err := s.sessions.save(c, ""); err != nil {
		return err
	}
	return c.Redirect("/login", http.StatusSeeOther)
}

// --- overview ---

// overviewData is what the overview shows, shared by every open overview
// for a second (they all refresh on the same event).
func (s *server) overviewData(ctx context.Context) (views.Overview, error) {
	return s.overview.get(ctx, s.loadOverview)
}

func (s *server) loadOverview(ctx context.Context) (views.Overview, error) {
	var o views.Overview
	var err error
	if o.Counts, err = s.dash.CappedCounts(ctx, jobs.States, countCap); err != nil {
		return o, err
	}
	for _, sc := range o.Counts {
		if sc.State == jobs.StateDeadLetter {
			o.DLQ, o.DLQCapped = sc.Count, sc.Capped
		}
	}
	if o.Throughput, err = s.dash.Throughput(ctx); err != nil {
		return o, err
	}
	for _, b := range o.Throughput {
		o.CompletedHour += b.Outcomes["succeeded"]
		o.FailedHour += b.Outcomes["failed"]
	}
	if o.Workers, err = s.workers(ctx); err != nil {
		return o, err
	}
	o.RecentFailures, err = s.dash.RecentFailures(ctx, 8)
	return o, err
}

func (s *server) overviewPage(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewPage(s.chrome(c, "Overview", "overview", true), o))
}

func (s *server) overviewLive(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewLive(o, s.clock.Now()))
}

// --- lists: jobs, DLQ, bin ---

func (s *server) listData(c *fiber.Ctx, kind string) (views.JobsList, error) {
	l := views.JobsList{Kind: kind, Types: s.registry.Types()}
	l.Filter = views.JobsFilter{Status: c.Query("status"), Type: c.Query("type"), Queue: c.Query("queue"), Q: c.Query("q"), Cursor: c.Query("cursor")}
	if c.Method() == fiber.MethodPost {
		l.Filter = views.JobsFilter{Status: c.FormValue("status"), Type: c.FormValue("type"), Queue: c.FormValue("queue"), Q: c.FormValue("q")}
	}
	p := jobs.ListParams{Type: l.Filter.Type, Queue: l.Filter.Queue, Q: l.Filter.Q, Cursor: l.Filter.Cursor, Limit: 50}
	switch kind {
	case "dlq":
		p.Statuses = []jobs.State{jobs.StateDeadLetter}
		l.Filter.Status = ""
	case "bin":
		p.InBin = true
	}
	if l.Filter.Status != "" {
		st := jobs.State(l.Filter.Status)
		if !st.Valid() {
			l.Error = "Unknown status " + strconv.Quote(l.Filter.Status) + "."
			l.Filter.Status = ""
		} else {
			p.Statuses = []jobs.State{st}
		}
	}
	l.HasCursor = p.Cursor != ""
	page, err := s.store.ListJobs(c.UserContext(), p)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		l.Error = "Cannot filter that way: " + ve.Error()
		return l, nil
	}
	if err != nil {
		return l, err
	}
	l.Jobs, l.NextCursor = page.Jobs, page.NextCursor
	return l, nil
}

func (s *server) listPage(kind, title string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		l, err := s.listData(c, kind)
		if err != nil {
			return err
		}
		if isHX(c) && c.Get("HX-Target") == "jobs-table" {
			return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
		}
		if kind == "jobs" { // the queue filter's suggestions, outside the table
			if l.Queues, err = s.dash.Queues(c.UserContext()); err != nil {
				return err
			}
		}
		return render(c, http.StatusOK, views.JobsPage(s.chrome(c, title, kind, true), l))
	}
}

// bulk applies an action to the selected jobs of a list and re-renders it.
func (s *server) bulk(kind string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		action := c.FormValue("action")
		allowed := map[string][]string{"jobs": {"retry", "cancel", "delete"}, "dlq": {"retry", "delete"}, "bin": {"restore", "purge"}}[kind]
		if !slices.Contains(allowed, action) {
			toast(c, "Unknown action.", "bad")
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		var ids []uuid.UUID
		for _, v := range c.Context().PostArgs().PeekMulti("ids") {
			id, err := uuid.ParseBytes(v)
			if err != nil {
				toast(c, "The selection held something that is not a job id.", "bad")
				return c.SendStatus(http.StatusUnprocessableEntity)
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			toast(c, "Select at least one job first.", "bad")
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		if len(ids) > 500 {
			toast(c, "Select at most 500 jobs at a time.", "bad")
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		done, refused, err := s.applyAll(c, action, ids)
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("%s: %d of %d jobs.", actionPast(action), done, len(ids))
		kindToast := "ok"
		if len(refused) > 0 {
			msg += " Not possible for " + strconv.Itoa(len(refused)) + ": " + refused[0]
			kindToast = "bad"
		}
		s.logger.InfoContext(c.UserContext(), "dashboard bulk action", "component", "dashboard", "action", action,
			"count", done, "actor", dashActor(c))
		toast(c, msg, kindToast)
		l, err := s.listData(c, kind)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
	}
}

// applyAll runs one action on many jobs and records what it did. It
// collects why jobs were refused (not found, not allowed from their
// state); any other error stops it and is returned, to surface as a 5xx
// rather than pass for a refusal.
func (s *server) applyAll(c *fiber.Ctx, action string, ids []uuid.UUID) (done int, refused []string, err error) {
	ctx := c.UserContext()
	var applied []uuid.UUID
	defer func() {
		if len(applied) > 0 {
			s.audit(c, action, nil, applied...)
		}
	}()
	for _, id := range ids {
		if _, err := s.jobOp(ctx, action, id); err != nil {
			r := refusal(err)
			if r == nil {
				return len(applied), refused, err
			}
			refused = append(refused, r.Message)
			continue
		}
		applied = append(applied, id)
	}
	return len(applied), refused, nil
}

func actionPast(action string) string {
	return map[string]string{"retry": "Retried", "cancel": "Cancelled", "delete": "Moved to the bin",
		"restore": "Restored", "purge": "Purged"}[action]
}

func (s *server) replayAll(c *fiber.Ctx) error {
	replayed, err := s.store.RetryDLQ(c.UserContext(), nil)
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, len(replayed))
	for i, j := range replayed {
		ids[i] = j.ID
	}
	s.wakeFor(replayed...)
	s.audit(c, "dlq_replay", map[string]any{"scope": "all", "replayed": len(ids)}, ids...)
	toast(c, fmt.Sprintf("Replayed %d jobs from the dead-letter queue.", len(replayed)), "ok")
	l, err := s.listData(c, "dlq")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
}

// --- job detail ---

func (s *server) jobDetail(ctx context.Context, id uuid.UUID) (views.JobDetail, error) {
	jd, err := s.loadJob(ctx, id)
	if err != nil {
		return views.JobDetail{}, err
	}
	d := views.JobDetail{Job: jd.Job, Executions: jd.Executions, Dependencies: jd.Dependencies}
	if s.auditStore != nil {
		d.Audit, err = s.auditStore.ListAudit(ctx, jobs.AuditQuery{JobID: &id, Limit: 20})
	}
	return d, err
}

func (s *server) jobPage(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.notFound(c)
	}
	d, err := s.jobDetail(c.UserContext(), id)
	if errors.Is(err, jobs.ErrNotFound) {
		return s.notFound(c)
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobPage(s.chrome(c, "Job "+views.ShortID(id), "jobs", true), d))
}

func (s *server) jobLive(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.notFound(c)
	}
	d, err := s.jobDetail(c.UserContext(), id)
	if errors.Is(err, jobs.ErrNotFound) {
		return redirectHX(c, "/jobs")
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobLive(d, s.clock.Now()))
}

// jobActionHTML runs an action from the job page and re-renders its live
// part, or explains why the action was refused.
func (s *server) jobActionHTML(action string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.notFound(c)
		}
		ctx := c.UserContext()
		_, refused, err := s.applyAll(c, action, []uuid.UUID{id})
		if err != nil {
			return err
		}
		if len(refused) > 0 {
			toast(c, "Not possible: "+refused[0], "bad")
			return c.SendStatus(http.StatusConflict)
		}
		if action == "purge" {
			return redirectHX(c, "/bin")
		}
		s.logger.InfoContext(ctx, "dashboard action", "component", "dashboard", "action", action, "job_id", id, "actor", dashActor(c))
		toast(c, actionPast(action)+".", "ok")
		d, err := s.jobDetail(ctx, id)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.JobLive(d, s.clock.Now()))
	}
}

func (s *server) notFound(c *fiber.Ctx) error {
	return render(c, http.StatusNotFound, views.ErrorPage(s.chrome(c, "Not found", "", false), "Not found", "There is no such page or job. It may have been purged."))
}

// --- create ---

func (s *server) createPage(c *fiber.Ctx) error {
	f := views.CreateForm{Values: map[string]string{"type": jobs.TypeNoop, "payload": "{}", "priority": "medium"}, Errors: map[string]string{}, Types: s.registry.Types()}
	if clone := c.Query("clone"); clone != "" {
		if id, err := uuid.Parse(clone); err == nil {
			if j, err := s.store.GetJob(c.UserContext(), id); err == nil {
				f.Values = map[string]string{"type": j.Type, "queue": j.Queue, "priority": views.PriorityLabel(j.Priority),
					"payload": views.PrettyJSON(j.Payload), "max_retries": strconv.Itoa(j.MaxRetries)}
				if j.TimeoutSeconds > 0 {
					f.Values["timeout_seconds"] = strconv.Itoa(j.TimeoutSeconds)
				}
			}
		}
	}
	return render(c, http.StatusOK, views.CreatePage(s.chrome(c, "Create a job", "new", false), f))
}

var createFields = []string{"type", "queue", "priority", "payload", "run_at", "delay_seconds", "max_retries",
	"timeout_seconds", "interval_seconds", "cron", "timezone", "depends_on", "idempotency_key"}

func (s *server) createJob(c *fiber.Ctx) error {
	f := views.CreateForm{Values: map[string]string{}, Errors: map[string]string{}, Types: s.registry.Types()}
	for _, k := range createFields {
		f.Values[k] = c.FormValue(k)
	}
	p, field, err := s.formParams(f.Values)
	if err == nil {
		var res []jobs.Enqueued
		res, err = s.store.Enqueue(c.UserContext(), p)
		if err == nil {
			s.enqueued(res)
			s.audit(c, "create", map[string]string{"type": res[0].Job.Type}, res[0].Job.ID)
			s.logger.InfoContext(c.UserContext(), "job created from the dashboard", "component", "dashboard",
				"job_id", res[0].Job.ID, "type", res[0].Job.Type, "actor", dashActor(c))
			return redirectHX(c, "/jobs/"+res[0].Job.ID.String())
		}
		var ve *jobs.ValidationError
		if errors.As(err, &ve) {
			field = ve.Field
		}
	}
	var ve *jobs.ValidationError
	var ae *apiError
	switch {
	case errors.As(err, &ve):
		f.Errors[formField(field, ve.Field)] = ve.Message
	case errors.As(err, &ae):
		f.Errors[formField(field, ae.Field)] = ae.Message
	default:
		return err
	}
	if len(f.Errors) == 1 {
		for k := range f.Errors {
			if !slices.Contains(createFields, k) {
				f.Message = f.Errors[k]
			}
		}
	}
	return render(c, http.StatusUnprocessableEntity, views.CreateFormPartial(f))
}

// formField maps an error's field ("depends_on[2]", "payload") to the form
// field that shows it.
func formField(hint, field string) string {
	if field == "" {
		field = hint
	}
	if i := strings.IndexAny(field, "[."); i >= 0 {
		field = field[:i]
	}
	return field
}

// formParams turns the create form into enqueue parameters through the same
// validation as the API.
func (s *server) formParams(v map[string]string) (jobs.EnqueueParams, string, error) {
	r := enqueueRequest{Type: v["type"], Queue: strings.TrimSpace(v["queue"])}
	if pl := strings.TrimSpace(v["payload"]); pl != "" {
		r.Payload = json.RawMessage(pl)
	}
	if p := v["priority"]; p != "" {
		var pv priorityValue
		if err := pv.UnmarshalJSON([]byte(strconv.Quote(p))); err != nil {
			return jobs.EnqueueParams{}, "priority", invalid("priority", "choose high, medium or low")
		}
		r.Priority = &pv
	}
	intField := func(name string, dst **int) error {
		if s := strings.TrimSpace(v[name]); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return invalid(name, "must be a whole number")
			}
			*dst = &n
		}
		return nil
	}
	if err := intField("max_retries", &r.MaxRetries); err != nil {
		return jobs.EnqueueParams{}, "max_retries", err
	}
	if err := intField("timeout_seconds", &r.TimeoutSeconds); err != nil {
		return jobs.EnqueueParams{}, "timeout_seconds", err
	}
	if s := strings.TrimSpace(v["delay_seconds"]); s != "" {
		d, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return jobs.EnqueueParams{}, "delay_seconds", invalid("delay_seconds", "must be a number of seconds")
		}
		r.DelaySeconds = &d
	}
	if s := strings.TrimSpace(v["interval_seconds"]); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return jobs.EnqueueParams{}, "interval_seconds", invalid("interval_seconds", "must be a whole number of seconds")
		}
		r.IntervalSeconds = &n
	}
	if s := strings.TrimSpace(v["run_at"]); s != "" {
		t, err := time.Parse("2006-01-02T15:04:05", s)
		if err != nil {
			t, err = time.Parse("2006-01-02T15:04", s)
		}
		if err != nil {
			return jobs.EnqueueParams{}, "run_at", invalid("run_at", "must be a date and time")
		}
		iso := t.UTC().Format(time.RFC3339)
		r.RunAt = &iso
	}
	for name, dst := range map[string]**string{"cron": &r.Cron, "timezone": &r.Timezone, "idempotency_key": &r.IdempotencyKey} {
		if s := strings.TrimSpace(v[name]); s != "" {
			*dst = &s
		}
	}
	if s := strings.TrimSpace(v["depends_on"]); s != "" {
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' || r == '\r' || r == '\t' }) {
			r.DependsOn = append(r.DependsOn, part)
		}
	}
	p, err := r.params(s.registry, s.clock.Now(), "", parseJobRef)
	if err != nil {
		return p, "", err
	}
	s.applyDefaults(&p)
	return p, "", nil
}

// --- recurring, workers ---

func (s *server) recurringPage(c *fiber.Ctx) error {
	list, err := s.store.ListSchedules(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "recurring-table" {
		return render(c, http.StatusOK, views.RecurringTable(list, s.clock.Now()))
	}
	return render(c, http.StatusOK, views.RecurringPage(s.chrome(c, "Recurring", "recurring", true), list))
}

func (s *server) recurringActionHTML(action string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.notFound(c)
		}
		op := action
		if action == "run" {
			op = "run_now"
		}
		if _, _, err := s.seriesOp(c, op, id); err != nil {
			r := refusal(err)
			if r == nil {
				return err
			}
			toast(c, "Not possible: "+r.Message, "bad")
			return c.SendStatus(r.Status)
		}
		toast(c, map[string]string{"pause": "Series paused.", "resume": "Series resumed.", "run": "An extra occurrence was enqueued.",
			"delete": "Series deleted."}[action], "ok")
		list, err := s.store.ListSchedules(c.UserContext())
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.RecurringTable(list, s.clock.Now()))
	}
}

func (s *server) workersPage(c *fiber.Ctx) error {
	ws, err := s.workers(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "workers-live" {
		return render(c, http.StatusOK, views.WorkersTable(ws, s.clock.Now()))
	}
	return render(c, http.StatusOK, views.WorkersPage(s.chrome(c, "Workers", "workers", true), ws))
}

// --- settings ---

func settingsValues(st jobs.Settings) map[string]string {
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
		st, err := s.store.GetSettings(ctx)
		if err != nil {
			return f, err
		}
		f.Values = settingsValues(st)
	}
	changes, err := s.store.ListSettingsChanges(ctx, 15)
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
	for _, name := range jobs.SettingNames() {
		v := strings.TrimSpace(c.FormValue(name))
		values[name] = v
		switch name {
		case "scheduler_strategy":
			patch[name], _ = json.Marshal(v)
		case "alert_emails":
			list := []string{}
			for _, e := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == ';' }) {
				list = append(list, e)
			}
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
	st, changed, err := s.store.UpdateSettings(ctx, patch, dashActor(c))
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
		toast(c, "Nothing changed.", "ok")
	} else {
		toast(c, "Settings saved.", "ok")
	}
	return render(c, http.StatusOK, views.SettingsFormPartial(f))
}

// loginRedirectTarget returns next when it is a path on this site, and "/"
// otherwise. url.Parse refuses control characters (no header injection, no
// tab that a browser would drop from "/\t/evil.example"); a host, a scheme,
// "//" or a backslash (which browsers read as a slash) would leave the site.
// The result is re-encoded, so it is safe to put in a Location header.
func loginRedirectTarget(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.Contains(u.Path, "\\") {
		return "/"
	}
	return u.RequestURI()
}
