package archtest

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// updateDocs rewrites the contents lists of docs/*.md from their headings:
// go test ./internal/archtest -run TestDocsContents -update-docs.
var updateDocs = flag.Bool("update-docs", false, "rewrite the contents lists of docs/*.md from their headings")

// The contents list of a page sits between these two lines.
const (
	contentsOpen  = "<!-- contents -->"
	contentsClose = "<!-- /contents -->"
)

// docPages lists README.md and every page under docs/, relative to the
// module's root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md", "ARCHITECTURE.md", "CHANGELOG.md"}
	for _, p := range pages {
		out = append(out, filepath.Join("docs", filepath.Base(p)))
	}
	return out
}

// headings returns a Markdown text's headings outside fenced blocks, as
// (level, text) pairs.
func headings(text string) (levels []int, titles []string) {
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if m := regexp.MustCompile(`^(#{1,6}) (.+)$`).FindStringSubmatch(l); m != nil {
			levels = append(levels, len(m[1]))
			titles = append(titles, strings.TrimSpace(m[2]))
		}
	}
	return levels, titles
}

// anchor is the fragment GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns every fragment a page's headings define (a repeated
// heading gets -1, -2, … as on GitHub).
func anchors(text string) map[string]bool {
	_, titles := headings(text)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range titles {
		a := anchor(h)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// contentsFor is the contents list a page's second-level headings make.
func contentsFor(text string) string {
	levels, titles := headings(text)
	var b strings.Builder
	b.WriteString(contentsOpen + "\n")
	for i, h := range titles {
		if levels[i] == 2 {
			fmt.Fprintf(&b, "- [%s](#%s)\n", strings.ReplaceAll(h, "`", ""), anchor(h))
		}
	}
	b.WriteString(contentsClose)
	return b.String()
}

// TestDocsContents holds each page under docs/ to a contents list, between
// <!-- contents --> and <!-- /contents -->, of exactly its second-level
// headings in order. -update-docs rewrites the lists.
func TestDocsContents(t *testing.T) {
	for _, page := range docPages(t) {
		if !strings.HasPrefix(page, "docs"+string(filepath.Separator)) {
			continue
		}
		path := filepath.Join(moduleRoot, page)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		text := string(raw)
		start := strings.Index(text, contentsOpen)
		if start < 0 {
			t.Errorf("%s has no contents list: put a line %q below its introduction and run go test ./internal/archtest -run TestDocsContents -update-docs", page, contentsOpen)
			continue
		}
		end := start + len(contentsOpen)
		if i := strings.Index(text[start:], contentsClose); i >= 0 {
			end = start + i + len(contentsClose)
		}
		want := contentsFor(text)
		if text[start:end] == want {
			continue
		}
		if *updateDocs {
			require.NoError(t, os.WriteFile(path, []byte(text[:start]+want+text[end:]), 0o644))
			continue
		}
		t.Errorf("%s: the contents list does not match the headings; run go test ./internal/archtest -run TestDocsContents -update-docs", page)
	}
}

// mdLink matches a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks checks every relative link of README.md, ARCHITECTURE.md,
// CHANGELOG.md and docs/*.md: the file it names exists, and a fragment
// names a heading of the page it points to.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(filepath.Join(moduleRoot, page))
		require.NoError(t, err)
		fence := false
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				checkLink(t, page, n+1, m[1])
			}
		}
	}
}

// checkLink reports a link of page (at line n) whose file or heading does
// not exist; links off the repository are not followed.
func checkLink(t *testing.T, page string, n int, target string) {
	t.Helper()
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "/") {
		return
	}
	file, frag, _ := strings.Cut(target, "#")
	path := filepath.Join(moduleRoot, page)
	if file != "" {
		path = filepath.Join(moduleRoot, filepath.Dir(page), file)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s:%d links to %s, which does not exist", page, n, target)
			return
		}
	}
	if frag == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	if !anchors(string(raw))[frag] {
		t.Errorf("%s:%d links to %s, but %s has no heading with the anchor #%s (headings: %s)", page, n, target, filepath.Base(path), frag, strings.Join(slices.Sorted(maps.Keys(anchors(string(raw)))), ", "))
	}
}

// Between these lines docs/api.md holds the endpoints, generated from
// internal/handlers/openapi.json.
const (
	endpointsOpen  = "<!-- endpoints -->"
	endpointsClose = "<!-- /endpoints -->"
)

// endpointTables renders the OpenAPI document's operations as one table
// per tag, in the document's order: method and path, what it does, the
// scope it needs.
func endpointTables(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "handlers", "openapi.json"))
	require.NoError(t, err)
	type operation struct {
		Summary string   `json:"summary"`
		Tags    []string `json:"tags"`
		Scope   string   `json:"x-flint-scope"`
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	type op struct{ method, path, summary, scope string }
	byTag := map[string][]op{}
	var tags []string
	// The document's order of paths (a map forgets it).
	for _, m := range regexp.MustCompile(`(?m)^  "(/[^"]*)": \{`).FindAllStringSubmatch(string(raw), -1) {
		path := m[1]
		for _, method := range []string{"get", "post", "put", "patch", "delete"} {
			v, ok := doc.Paths[path][method]
			if !ok {
				continue
			}
			var o operation
			require.NoError(t, json.Unmarshal(v, &o))
			tag := "other"
			if len(o.Tags) > 0 {
				tag = o.Tags[0]
			}
			if _, seen := byTag[tag]; !seen {
				tags = append(tags, tag)
			}
			byTag[tag] = append(byTag[tag], op{strings.ToUpper(method), path, o.Summary, cmp.Or(o.Scope, "none")})
		}
	}
	var b strings.Builder
	b.WriteString(endpointsOpen + "\n")
	for _, tag := range tags {
		fmt.Fprintf(&b, "\n### %s\n\n| endpoint | what it does | scope |\n|---|---|---|\n", tag)
		for _, o := range byTag[tag] {
			fmt.Fprintf(&b, "| `%s %s` | %s | `%s` |\n", o.method, o.path, o.summary, o.scope)
		}
	}
	b.WriteString("\n" + endpointsClose)
	return b.String()
}

// TestAPIPageEndpoints holds docs/api.md's endpoint tables to the OpenAPI
// document the server serves: every operation, its summary and scope.
// -update-docs rewrites them.
func TestAPIPageEndpoints(t *testing.T) {
	path := filepath.Join(moduleRoot, "docs", "api.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(raw)
	start, end := strings.Index(text, endpointsOpen), strings.Index(text, endpointsClose)
	require.True(t, start >= 0 && end > start, "docs/api.md has no %s … %s block", endpointsOpen, endpointsClose)
	end += len(endpointsClose)
	want := endpointTables(t)
	if text[start:end] == want {
		return
	}
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(text[:start]+want+text[end:]), 0o644))
		return
	}
	t.Errorf("docs/api.md's endpoints differ from internal/handlers/openapi.json; run go test ./internal/archtest -run TestAPIPageEndpoints -update-docs")
}

// runnableFence matches the opening fence of a block in a language a
// reader would run or compile.
var runnableFence = regexp.MustCompile("^```(sh|bash|shell|console|go|python|py|js|javascript|ts|typescript)\\s*$")

// blockMark matches the marks a runnable block carries on the line before
// its fence: run by a named test, run by the guides' runner, or not run
// with the reason.
var blockMark = regexp.MustCompile(`^<!-- (doc-test: (\S+)|doc-run|not run: (\S.*\S)) -->$`)

// TestDocBlocksRunOrSayWhyNot holds every shell, Go, Python and
// JavaScript block of README.md and docs/*.md to one of three marks on the
// line before its fence: <!-- doc-test: NAME --> (a test in internal/e2e
// reads the block by that name), <!-- doc-run --> (TestGuidesRunAsWritten
// runs the page's marked blocks in order against a real Flint), or
// <!-- not run: REASON -->.
func TestDocBlocksRunOrSayWhyNot(t *testing.T) {
	t.Parallel()
	tests := e2eSources(t)
	for _, page := range docPages(t) {
		if page == "ARCHITECTURE.md" || page == "CHANGELOG.md" {
			continue
		}
		lines := readDoc(t, page)
		fence := false
		for i, l := range lines {
			if !strings.HasPrefix(l.text, "```") {
				continue
			}
			opening := !fence
			fence = !fence
			if !opening || !runnableFence.MatchString(l.text) {
				continue
			}
			prev := ""
			if i > 0 {
				prev = strings.TrimSpace(lines[i-1].text)
			}
			m := blockMark.FindStringSubmatch(prev)
			switch {
			case m == nil:
				t.Errorf("%s:%d: a %s block with no mark: put <!-- doc-run -->, <!-- doc-test: NAME --> or <!-- not run: REASON --> on the line before its fence", page, l.n, strings.TrimPrefix(l.text, "```"))
			case m[2] != "" && !strings.Contains(tests, `"`+m[2]+`"`):
				t.Errorf("%s:%d: the block is marked doc-test: %s, but no test in internal/e2e names it", page, l.n, m[2])
			}
		}
	}
}

// e2eSources is the text of every test file of internal/e2e.
func e2eSources(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(moduleRoot, "internal", "e2e", "*_test.go"))
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		b.Write(raw)
	}
	return b.String()
}
