package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
)

// AuditStore records and lists operator actions; *db.Store implements it.
type AuditStore interface {
	// RecordAudit stores an operator action, once per job it touched (or
	// once when it touched none).
	RecordAudit(ctx context.Context, e domain.AuditEntry, jobIDs ...uuid.UUID) error
	// ListAudit returns the entries q asks for, newest first.
	ListAudit(ctx context.Context, q domain.AuditQuery) ([]domain.AuditEntry, error)
}

// audit records an operator action. A failure to record is logged, not
// returned: the action itself has happened.
func (s *server) audit(c *fiber.Ctx, action string, details any, ids ...uuid.UUID) {
	if s.auditStore == nil {
		return
	}
	e := auditActor(c)
	e.Action = action
	if details != nil {
		e.Details, _ = json.Marshal(details)
	}
	if err := s.auditStore.RecordAudit(c.UserContext(), e, ids...); err != nil {
		s.logger.ErrorContext(c.UserContext(), "recording an audit entry failed", "component", "audit", "action", action, "error", err)
	}
}

// auditActor is who acts in this request, for the audit trail: the
// signed-in person's email on the dashboard, key:<name> for an API key
// (key:FLINT_API_KEY for the bootstrap key).
func auditActor(c *fiber.Ctx) domain.AuditEntry {
	e := domain.AuditEntry{IP: clientAddr(c), Source: "api", Actor: "unknown"}
	if p, ok := principalOf(c); ok {
		e.Source, e.Actor = p.source, p.actor
	}
	return e
}

// auditQuery reads job_id, before and limit.
func auditQuery(c *fiber.Ctx) (domain.AuditQuery, error) {
	var q domain.AuditQuery
	if v := c.Query("job_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return q, invalid("job_id", "must be a job id (UUID)")
		}
		q.JobID = &id
	}
	if v := c.Query("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return q, invalid("before", "must be an entry id from a previous page")
		}
		q.Before = n
	}
	var err error
	q.Limit, err = limitQuery(c, 100)
	return q, err
}

// listAudit handles GET /api/v1/audit.
func (s *server) listAudit(c *fiber.Ctx) error {
	q, err := auditQuery(c)
	if err != nil {
		return err
	}
	entries, err := s.auditStore.ListAudit(c.UserContext(), q)
	if err != nil {
		return err
	}
	var next *int64
	if len(entries) == q.Limit {
		n := entries[len(entries)-1].ID
		next = &n
	}
	return c.JSON(fiber.Map{"entries": auditForCaller(c, entries), "next_before": next})
}

// auditPage handles GET /audit.
func (s *server) auditPage(c *fiber.Ctx) error {
	q, err := auditQuery(c)
	if err != nil {
		q = domain.AuditQuery{Limit: 100}
	}
	entries, err := s.auditStore.ListAudit(c.UserContext(), q)
	if err != nil {
		return err
	}
	next := int64(0)
	if len(entries) == q.Limit {
		next = entries[len(entries)-1].ID
	}
	entries = auditForCaller(c, entries)
	live := q.Before == 0 && q.JobID == nil // the newest entries, unfiltered, update live
	if live && isHX(c) && c.Get("HX-Target") == "audit-live" {
		return render(c, http.StatusOK, views.AuditCard(entries, next, true))
	}
	return render(c, http.StatusOK, views.AuditPageView(s.chrome(c, "Audit", "audit", live), entries, next, live))
}
