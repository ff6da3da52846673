package handlers

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// typeInfo is GET /api/v1/types/{type}: a job type's payload schema in
// force, its kept versions (who stored each, when) and the live workers
// that serve it.
type typeInfo struct {
	Type     string                 `json:"type"`
	Known    bool                   `json:"known"`
	Schema   json.RawMessage        `json:"schema"`
	Versions []domain.SchemaVersion `json:"versions"`
	Workers  []domain.WorkerInfo    `json:"workers"`
}

// typeParam reads the job type of a /types/:type path (a "/" in a type is sent as %2F).
func typeParam(c *fiber.Ctx) (string, error) {
	t, err := url.PathUnescape(c.Params("type"))
	if err != nil || !jobs.ValidType(t) {
		return "", invalid("type", "is not a job type: 1-100 letters, digits or _ . : / -")
	}
	return t, nil
}

// loadTypeInfo gathers what is known of jobType.
func (s *server) loadTypeInfo(ctx context.Context, jobType string) (typeInfo, error) {
	s.types.Prepare(ctx, jobType, "")
	ti := typeInfo{Type: jobType, Known: slices.Contains(s.types.Known(), jobType), Versions: []domain.SchemaVersion{},
		Workers: []domain.WorkerInfo{}}
	vs, err := s.typeStore.SchemaHistory(ctx, jobType)
	if err != nil {
		return ti, err
	}
	if len(vs) > 0 {
		ti.Versions, ti.Schema = vs, vs[0].Schema
	}
	if s.workers != nil {
		ws, err := s.workers(ctx)
		if err != nil {
			return ti, err
		}
		for _, w := range ws {
			if len(w.Types) == 0 || slices.Contains(w.Types, jobType) {
				ti.Workers = append(ti.Workers, w)
			}
		}
	}
	return ti, nil
}

// getType handles GET /api/v1/types/{type}.
func (s *server) getType(c *fiber.Ctx) error {
	t, err := typeParam(c)
	if err != nil {
		return err
	}
	ti, err := s.loadTypeInfo(c.UserContext(), t)
	if err != nil {
		return err
	}
	if !ti.Known && len(ti.Versions) == 0 {
		return &apiError{Status: fiber.StatusNotFound, Code: "not_found", Field: "type",
			Message: "no such job type: nothing here handles it, no worker seen in the last 24 hours serves it, and no schema is stored for it"}
	}
	return c.JSON(ti)
}
