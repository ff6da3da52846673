package views

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DiffLine is one line of a line diff: Op is ' ' (in both), '-' (only in
// the old text) or '+' (only in the new).
type DiffLine struct {
	Op   byte
	Text string
}

// maxDiffCells bounds the longest-common-subsequence table; past it, the
// diff shows the old text removed and the new one added.
const maxDiffCells = 4_000_000

// LineDiff compares two texts line by line (longest common subsequence).
func LineDiff(oldText, newText string) []DiffLine {
	a, b := strings.Split(oldText, "\n"), strings.Split(newText, "\n")
	if len(a)*len(b) > maxDiffCells {
		out := make([]DiffLine, 0, len(a)+len(b))
		for _, l := range a {
			out = append(out, DiffLine{'-', l})
		}
		for _, l := range b {
			out = append(out, DiffLine{'+', l})
		}
		return out
	}
	// lcs[i][j] is the common length of a[i:] and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []DiffLine
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, DiffLine{' ', a[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, DiffLine{'-', a[i]})
			i++
		default:
			out = append(out, DiffLine{'+', b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, DiffLine{'-', a[i]})
	}
	for ; j < len(b); j++ {
		out = append(out, DiffLine{'+', b[j]})
	}
	return out
}

// DiffChanged reports whether a diff holds any change.
func DiffChanged(d []DiffLine) bool {
	for _, l := range d {
		if l.Op != ' ' {
			return true
		}
	}
	return false
}

// CanonicalJSON prints a JSON document indented with object keys sorted,
// so that two documents that differ only in key order or spacing (jsonb
// reorders keys) print the same; what is not JSON is returned as it is.
// It is bounded as ShowJSON is: a document too long to indent comes back
// sorted on one line.
func CanonicalJSON(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	compact := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	if p := ShowJSON(compact); !p.Cut {
		return p.Text
	}
	return string(compact)
}
