package jobs

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The name checks are loops for speed; the patterns the API documents are
// the regular expressions below, and the two must agree on every string.
func TestNameChecksMatchTheDocumentedPatterns(t *testing.T) {
	typeRE := regexp.MustCompile(`^[A-Za-z0-9_.:/-]+$`)
	queueRE := regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
	cases := []string{"", "noop", "email.send", "a/b", "billing:eu-1", "ü", "a b", "a\x00", "tab\t",
		"x\n", "UPPER_lower.09", strings.Repeat("a", MaxTypeLen), strings.Repeat("a", MaxTypeLen+1),
		strings.Repeat("q", MaxQueueLen+1), "@", "[x]", "a,b", "é.type"}
	alphabet := []byte("aZ09_.:/- \x00\xff,@é")
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := ValidType(s), len(s) <= MaxTypeLen && typeRE.MatchString(s); got != want {
			t.Errorf("ValidType(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := ValidQueue(s), len(s) <= MaxQueueLen && queueRE.MatchString(s); got != want {
			t.Errorf("ValidQueue(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
