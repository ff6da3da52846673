package handlers

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// apiError is the JSON error every API failure returns.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Scope is, on a 403, the scope the request needed and lacked.
	Scope string `json:"scope,omitempty"`
}

// Error returns the message the client is sent.
func (e *apiError) Error() string { return e.Message }

// errorBody wraps an apiError as {"error": {...}}.
type errorBody struct {
	Error *apiError `json:"error"`
}

// badRequest is a 400 for input that cannot be read at all.
func badRequest(code, field, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Field: field, Message: msg}
}

// invalid is a 422 for well-formed input with a bad value.
func invalid(field, msg string) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation_failed", Field: field, Message: msg}
}

// ErrorHandler turns every error a route returns into a JSON response.
func ErrorHandler(logger *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		if diskFull(err) {
			logger.WarnContext(c.UserContext(), "request failed: the database's disk is full", "component", "http",
				"method", c.Method(), "path", c.Path(), "request_id", c.Locals(requestIDKey), "error", err)
			return diskFullAnswer(c)
		}
		if databaseUnavailable(err) {
			logger.WarnContext(c.UserContext(), "request failed: the database is unavailable", "component", "http",
				"method", c.Method(), "path", c.Path(), "request_id", c.Locals(requestIDKey), "error", err)
			return unavailable(c)
		}
		ae := toAPIError(err)
		if ae.Status >= 500 {
			logger.ErrorContext(c.UserContext(), "request failed", "component", "http",
				"method", c.Method(), "path", c.Path(), "request_id", c.Locals(requestIDKey), "error", err)
		}
		return c.Status(ae.Status).JSON(errorBody{Error: ae})
	}
}

func toAPIError(err error) *apiError {
	var ae *apiError
	var ve *jobs.ValidationError
	var te *domain.TransitionError
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ve):
		return invalid(ve.Field, ve.Error())
	case errors.Is(err, domain.ErrBatchClosed):
		return &apiError{Status: http.StatusConflict, Code: "batch_closed", Message: err.Error()}
	case errors.Is(err, domain.ErrNotFound):
		msg := "no such job"
		if err != domain.ErrNotFound {
			msg = strings.TrimSuffix(err.Error(), ": "+domain.ErrNotFound.Error())
		}
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: msg}
	case errors.As(err, &te):
		return &apiError{Status: http.StatusConflict, Code: "invalid_transition", Message: te.Error()}
	case errors.As(err, &fe):
		return fiberError(fe)
	default:
		return &apiError{Status: http.StatusInternalServerError, Code: "internal",
			Message: "internal error; the server log has the details"}
	}
}

func fiberError(fe *fiber.Error) *apiError {
	switch fe.Code {
	case fiber.StatusNotFound:
		return &apiError{Status: fe.Code, Code: "not_found", Message: "no such endpoint; see /api/v1/docs"}
	case fiber.StatusMethodNotAllowed:
		return &apiError{Status: fe.Code, Code: "method_not_allowed", Message: "this endpoint does not accept that method"}
	case fiber.StatusRequestEntityTooLarge:
		return &apiError{Status: fe.Code, Code: "payload_too_large", Message: "request body is too large"}
	case fiber.StatusRequestTimeout:
		return &apiError{Status: fe.Code, Code: "timeout", Message: "the request took too long"}
	}
	if fe.Code >= 400 && fe.Code < 500 {
		return &apiError{Status: fe.Code, Code: "bad_request", Message: fe.Message}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal",
		Message: "internal error; the server log has the details"}
}
