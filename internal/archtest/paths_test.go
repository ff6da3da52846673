package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath is a file of the repository written as code in a document: a
// path with at least one directory and a file extension.
var docPath = regexp.MustCompile("`((?:[a-z0-9_.-]+/)+[A-Za-z0-9_.-]+\\.(?:go|templ|js|css|sql|sh|py|md|json|yml|yaml|toml))`")

// TestDocumentedPathsExist: every file README and ARCHITECTURE name by
// its path exists, so that a file split or renamed takes its mentions
// with it.
func TestDocumentedPathsExist(t *testing.T) {
	for _, doc := range docPages(t) {
		for _, l := range readDoc(t, doc) {
			for _, m := range docPath.FindAllStringSubmatch(l.text, -1) {
				if strings.Contains(m[1], "YYYY") {
					continue // a pattern for new files, not a file
				}
				if _, err := os.Stat(filepath.Join(moduleRoot, m[1])); err != nil {
					t.Errorf("%s:%d names %s, which does not exist: point it at the file that holds it now", doc, l.n, m[1])
				}
			}
		}
	}
}
