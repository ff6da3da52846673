// Edit and replay: a dead-letter job's payload edited, the change shown
// as a diff, and the job replayed once the operator confirms.

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

const notInDLQ = "Only a job in the dead-letter queue can be edited and replayed; this one is %s."

// replayPage shows the editor for a dead-letter job, or why there is none.
func (s *server) replayPage(c *fiber.Ctx) error {
	j, err := s.jobFromPath(c)
	if j == nil {
		return err
	}
	f := views.ReplayForm{Job: jobForCaller(c, j)}
	f.Payload = views.EditableJSON(f.Job.Payload)
	if !replayable(j) {
		f.Refused, f.Error = true, replayRefusal(j)
	}
	return render(c, http.StatusOK, views.ReplayPage(s.chrome(c, "Edit and replay "+views.ShortID(j.ID), "dlq", false), f))
}

// replaySubmit handles the form's three steps: preview (validate, show the
// diff), edit (back to the editor) and replay (validate again, replay).
// What cannot be done comes back in the form with status 422, which the
// dashboard's htmx swaps in (the API answers 409 for a job outside the
// DLQ).
func (s *server) replaySubmit(c *fiber.Ctx) error {
	j, err := s.jobFromPath(c)
	if j == nil {
		return err
	}
	f := views.ReplayForm{Job: jobForCaller(c, j), Payload: c.FormValue("payload")}
	if !replayable(j) {
		f.Refused, f.Error = true, replayRefusal(j)
		return render(c, http.StatusUnprocessableEntity, views.ReplayFormPartial(f))
	}
	step := c.FormValue("step")
	if step == "edit" {
		return render(c, http.StatusOK, views.ReplayFormPartial(f))
	}
	if strings.TrimSpace(f.Payload) == "" || strings.TrimSpace(f.Payload) == "null" {
		f.Error = "The payload is empty: give the JSON object the job should run with, {} for none."
		return render(c, http.StatusUnprocessableEntity, views.ReplayFormPartial(f))
	}
	edited := []byte(f.Payload)
	if j.Type == jobs.TypeHTTPRequest && !seesSecrets(c) {
		edited = restoreRedacted(j.Payload, edited)
	}
	clean, err := s.registry.CheckPayload(j.Type, edited)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		f.Error = "Payload: " + ve.Message + "."
		return render(c, http.StatusUnprocessableEntity, views.ReplayFormPartial(f))
	}
	if err != nil {
		return err
	}
	switch step {
	case "preview":
		f.Preview = true
		after := payloadForCaller(c, &jobs.Job{Type: j.Type, Payload: clean})
		f.Diff = views.LineDiff(views.CanonicalJSON(f.Job.Payload), views.CanonicalJSON(after))
		return render(c, http.StatusOK, views.ReplayFormPartial(f))
	case "replay":
		_, _, err := s.jobActionStore.EditAndReplay(c.UserContext(), j.ID, clean, auditActor(c))
		var te *domain.TransitionError
		if errors.As(err, &te) {
			f.Refused, f.Error = true, err.Error()
			return render(c, http.StatusUnprocessableEntity, views.ReplayFormPartial(f))
		}
		if err != nil {
			return err
		}
		toast(c, "Replayed with the edited payload", toastOK)
		return redirectHX(c, "/jobs/"+j.ID.String())
	default:
		f.Error = `Choose "Show the changes" first.`
		return render(c, http.StatusUnprocessableEntity, views.ReplayFormPartial(f))
	}
}

func replayable(j *jobs.Job) bool {
	return j.DeletedAt == nil && slices.Contains(domain.ReplayFrom, j.Status)
}

func replayRefusal(j *jobs.Job) string {
	if j.DeletedAt != nil {
		return "This job is in the bin; restore it first."
	}
	return fmt.Sprintf(notInDLQ, j.Status)
}
