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

	"github.com/flinthq/flint/internal/jsonutil"
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
	if field, n, deep := scanShape(body); deep {
		return invalid(field, fmt.Sprintf("nests deeper than %d levels; flatten it", jobs.MaxJSONDepth))
	} else if n > maxListEntries {
		return invalid(field, fmt.Sprintf("holds more than %d entries; that is the limit of any request", maxListEntries))
	}
	return decodeStrict(body, v, "")
}

// maxListEntries bounds the lists of a request body (jobs of a batch,
// outcomes, leases, log lines, ids) before they are decoded: a Go struct
// per entry costs far more than the entry's JSON, so 16 MiB of "{}," would
// otherwise decode into gigabytes before any limit of the route is
// checked. It is the largest limit of any route (MaxBatch); each route
// checks its own after decoding.
const maxListEntries = MaxBatch

// maxBodyDepth is how deeply a request body may nest: the deepest user
// JSON it carries (a batch entry's payload, three levels down) at
// jobs.MaxJSONDepth. Deeper bodies are refused before decoding, where
// every level costs each of encoding/json's scanners a stack entry.
const maxBodyDepth = jobs.MaxJSONDepth + 3

// shapeLevel is where scanShape is at one level of the body: the key of
// an object's current field, or the index in a list.
type shapeLevel struct {
	list  bool
	key   []byte
	index int
}

// scanShape reads the body once, allocating nothing, for what must be
// refused before decoding: the longest list among the top-level object's
// fields (counted to just past maxListEntries; field names it, n is its
// length), and nesting past maxBodyDepth (deep; field names the field of
// the first three levels it is in, as "jobs[0].payload"). Malformed JSON
// is left to the decoder, which explains it.
func scanShape(raw []byte) (field string, n int, deep bool) {
	var path [4]shapeLevel
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			end := stringEnd(raw, i+1)
			if depth >= 1 && depth <= len(path) && !path[depth-1].list {
				path[depth-1].key = raw[i+1 : max(end-1, i+1)]
			}
			i = end - 1
		case '{', '[':
			if depth++; depth > maxBodyDepth {
				return pathField(path[:]), 0, true
			}
			if depth <= len(path) {
				path[depth-1] = shapeLevel{list: c == '['}
			}
		case '}', ']':
			if depth == 2 && path[1].list {
				if count := path[1].index + 1; count > n && nonEmpty(raw, i) {
					field, n = string(path[0].key), count
				}
			}
			depth--
		case ',':
			if depth >= 1 && depth <= len(path) && path[depth-1].list {
				path[depth-1].index++
				if depth == 2 && path[1].index >= maxListEntries {
					return string(path[0].key), path[1].index + 1, false
				}
			}
		}
	}
	return field, n, false
}

// nonEmpty reports whether the list closed at raw[i] had an entry.
func nonEmpty(raw []byte, i int) bool {
	for i--; i >= 0 && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r'); i-- {
	}
	return i >= 0 && raw[i] != '['
}

// pathField names the field the deep part is in: the top-level field,
// or for a list of objects, the entry's field ("jobs[0].payload").
func pathField(path []shapeLevel) string {
	name := string(path[0].key)
	if !path[1].list {
		return name
	}
	name += fmt.Sprintf("[%d]", path[1].index)
	if !path[2].list && path[2].key != nil {
		name += "." + string(path[2].key)
	}
	return name
}

// stringEnd returns the index past the closing quote of the string whose
// content starts at raw[i].
func stringEnd(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case '\\':
			i += 2
		case '"':
			return i + 1
		default:
			i++
		}
	}
	return len(raw)
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
		return invalid(field, fmt.Sprintf("must be %s (got %s)", jsonutil.JSONKind(typ.Type.Kind().String()), typ.Value))
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
