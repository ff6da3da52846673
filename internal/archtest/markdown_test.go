package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// modulePath is the import path of the module whose docs are checked.
const modulePath = "github.com/flinthq/flint"

// moduleRoot is the module's directory, seen from this package's.
var moduleRoot = filepath.Join("..", "..")

// docLine is one line of a Markdown file with its number (from 1).
type docLine struct {
	n    int
	text string
}

// readDoc returns the lines of a Markdown file at the module's root.
func readDoc(t *testing.T, name string) []docLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, name))
	require.NoError(t, err)
	var out []docLine
	for i, l := range strings.Split(string(b), "\n") {
		out = append(out, docLine{i + 1, l})
	}
	return out
}

// section returns the lines under the heading (a whole line, such as
// "## Packages") up to the next heading of the same or a higher level.
func section(t *testing.T, lines []docLine, heading string) []docLine {
	t.Helper()
	level := strings.Index(heading, " ")
	for i, l := range lines {
		if l.text != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			h := lines[j].text
			if k := strings.Index(h, " "); k > 0 && k <= level && strings.Trim(h[:k], "#") == "" {
				end = j
				break
			}
		}
		return lines[i+1 : end]
	}
	t.Fatalf("ARCHITECTURE.md has no heading %q; the test reads the section under it (rename the heading here too if it moved)", heading)
	return nil
}

// firstCodeBlock returns the lines of the section's first fenced block.
func firstCodeBlock(lines []docLine) []docLine {
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l.text, "```") {
			if start >= 0 {
				return lines[start+1 : i]
			}
			start = i
		}
	}
	return nil
}

// firstTable returns the body rows of the section's first Markdown table
// (without its header and separator), each split into trimmed cells.
func firstTable(lines []docLine) (rows [][]string, at []int) {
	inTable := false
	for _, l := range lines {
		if !strings.HasPrefix(l.text, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable {
			inTable = true
			continue // the header
		}
		cells := strings.Split(strings.Trim(l.text, "|"), "|")
		if strings.Trim(cells[0], " -:") == "" {
			continue // the separator
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
		at = append(at, l.n)
	}
	return rows, at
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// firstCodeSpan returns the text of the first `code span` in s.
func firstCodeSpan(s string) string {
	if m := codeSpan.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}
