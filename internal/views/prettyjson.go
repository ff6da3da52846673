package views

import "strings"

// Bounds on showing user JSON. Indenting costs output in proportion to
// depth times length (json.Indent turned a 20 KB payload nested 9,990
// deep into 200 MB), so what a page shows is bounded whatever the
// document: levels past PrettyMaxDepth stay on one line, and the text is
// cut at PrettyMaxBytes, or at 64 KiB plus twice the document's size if
// that is less, with a link to the raw JSON.
const (
	PrettyMaxDepth = 8
	PrettyMaxBytes = 256 << 10
	prettyBase     = 64 << 10
)

// Pretty is a JSON document as a page shows it.
type Pretty struct {
	// Text is the indented document, or its start when Cut.
	Text string
	// Cut says the document was longer than a page shows: link to the
	// raw JSON.
	Cut bool
}

// ShowJSON indents raw for display within the bounds above, in time and
// memory linear in what it writes, without a parse of its own (what it
// shows comes from jsonb, which is always valid JSON; other text is laid
// out the same way, within the same bounds). The result is text: templ
// escapes it where it is shown.
func ShowJSON(raw []byte) Pretty {
	limit := min(PrettyMaxBytes, prettyBase+2*len(raw))
	var b strings.Builder
	b.Grow(min(limit, len(raw)+len(raw)/2+16))
	cut := indentBounded(&b, raw, limit)
	return Pretty{Text: b.String(), Cut: cut}
}

// PrettyJSON is ShowJSON's text alone, for places that show small
// documents (audit details, built by Flint).
func PrettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	return ShowJSON(raw).Text
}

// EditableJSON is raw for a form to edit: indented when that fits the
// bounds, otherwise as it is stored (never cut: a form submits what it
// shows).
func EditableJSON(raw []byte) string {
	p := ShowJSON(raw)
	if p.Cut {
		return string(raw)
	}
	return p.Text
}

// indentBounded writes valid JSON raw to b indented by two spaces a
// level up to PrettyMaxDepth, and reports whether it stopped at limit.
func indentBounded(b *strings.Builder, raw []byte, limit int) bool {
	depth := 0
	newline := func(d int) {
		if d <= PrettyMaxDepth {
			b.WriteByte('\n')
			b.WriteString(indentOf(d))
		}
	}
	for i := 0; i < len(raw); i++ {
		if b.Len() > limit {
			return true
		}
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
		case '{', '[':
			j := skipSpace(raw, i+1)
			if j < len(raw) && (raw[j] == '}' || raw[j] == ']') {
				b.WriteByte(c)
				b.WriteByte(raw[j])
				i = j
				continue
			}
			depth++
			b.WriteByte(c)
			newline(depth)
		case '}', ']':
			if depth <= PrettyMaxDepth {
				b.WriteByte('\n')
				b.WriteString(indentOf(depth - 1))
			}
			depth--
			b.WriteByte(c)
		case ',':
			b.WriteByte(',')
			newline(depth)
			if depth > PrettyMaxDepth {
				b.WriteByte(' ')
			}
		case ':':
			b.WriteString(": ")
		case '"':
			end := stringEnd(raw, i+1)
			b.Write(raw[i:end])
			i = end - 1
		default:
			b.WriteByte(c)
		}
	}
	return false
}

// indents are the indentation strings of each level shown.
var indents = func() [PrettyMaxDepth + 1]string {
	var out [PrettyMaxDepth + 1]string
	for d := range out {
		out[d] = strings.Repeat("  ", d)
	}
	return out
}()

func indentOf(d int) string { return indents[max(min(d, PrettyMaxDepth), 0)] }

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
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
