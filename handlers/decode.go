package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/jobs"
)

// limitQuery reads the limit query parameter of a listing: 1 to 500, def
// when it is absent.
func limitQuery(c *fiber.Ctx, def int) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		return 0, invalid("limit", "must be a whole number between 1 and 500")
	}
	return n, nil
}

// decodeJSON reads the request body as exactly one JSON value into v,
// refusing other content types, unknown fields and trailing data.
func decodeJSON(c *fiber.Ctx, v any) error {
	ct := c.Get(fiber.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != fiber.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "send the body as JSON with Content-Type: application/json"}
	}
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("invalid_json", "", "request body is empty; send a JSON object")
	}
	return decodeStrict(body, v, "")
}

// decodeStrict decodes raw into v; prefix names the enclosing field in
// error messages (for example "jobs[3]").
func decodeStrict(raw []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, prefix)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid_json", prefix, "request body holds more than one JSON value")
	}
	return nil
}

// jsonError explains a decoding error, naming the field where known.
func jsonError(err error, prefix string) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		return invalid(join(prefix, fe.field), fe.msg)
	case errors.As(err, &syn):
		return badRequest("invalid_json", prefix, fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, syn.Error()))
	case errors.As(err, &typ):
		field := join(prefix, typ.Field)
		if typ.Field == "" {
			return badRequest("invalid_json", prefix, "expected a JSON object")
		}
		return invalid(field, fmt.Sprintf("must be %s (got %s)", jobs.JSONKind(typ.Type.Kind().String()), typ.Value))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", prefix, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(join(prefix, name), fmt.Sprintf("unknown field %q", name))
	default:
		return badRequest("invalid_json", prefix, "malformed JSON: "+strings.TrimPrefix(err.Error(), "json: "))
	}
}

// fieldError is returned by custom UnmarshalJSON methods to name the
// problem precisely.
type fieldError struct{ field, msg string }

// Error names the field and says what is wrong with it.
func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func join(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	default:
		return prefix + "." + field
	}
}
