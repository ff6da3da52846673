package logs

import (
	"regexp"
	"strings"
)

// tokenRule is a credential format recognisable on its own, without a
// key naming it: its fixed prefix is kept (so a reader knows what was
// there), the rest redacted. The formats are those the providers
// publish, as secret scanners (GitHub secret scanning, gitleaks) list
// them; the expressions are Flint's own.
type tokenRule struct {
	name  string
	hints []string       // one of them is in every match: a cheap test before the expression
	re    *regexp.Regexp // group 1 is the prefix kept
}

// tokenRules are the credential formats Scrub redacts wherever they
// appear. Each has a case in TestScrubTokenFormats.
var tokenRules = []tokenRule{
	{"AWS access key id", []string{"AKIA", "ASIA", "ABIA", "ACCA", "A3T"}, regexp.MustCompile(`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA))[A-Z0-9]{16}\b`)},
	{"Google API key", []string{"AIza"}, regexp.MustCompile(`\b(AIza)[0-9A-Za-z_-]{35}`)},
	{"GitHub token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, regexp.MustCompile(`\b((?:ghp|gho|ghu|ghs|ghr)_)[A-Za-z0-9]{36,255}\b`)},
	{"GitHub fine-grained token", []string{"github_pat_"}, regexp.MustCompile(`\b(github_pat_)[A-Za-z0-9_]{22,255}`)},
	{"Stripe key", []string{"_live_", "_test_"}, regexp.MustCompile(`\b((?:sk|rk)_(?:live|test)_)[A-Za-z0-9]{10,247}\b`)},
	{"Slack token", []string{"xox"}, regexp.MustCompile(`\b(xox[abposre]-)[A-Za-z0-9-]{10,}`)},
	{"SendGrid key", []string{"SG."}, regexp.MustCompile(`\b(SG\.)[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}`)},
	{"npm token", []string{"npm_"}, regexp.MustCompile(`\b(npm_)[A-Za-z0-9]{36}\b`)},
	{"JSON Web Token", []string{"eyJ"}, regexp.MustCompile(`\b(eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}`)},
	{"Flint key or secret", []string{"flint_"}, regexp.MustCompile(`\b(flint_(?:s1_)?)[A-Za-z0-9_-]{20,}`)},
	{"webhook signing secret", []string{"whsec_"}, regexp.MustCompile(`\b(whsec_)[A-Za-z0-9+/=]{16,}`)},
	{"PEM private key", []string{"PRIVATE KEY"}, regexp.MustCompile(`(-----BEGIN[A-Z ]* PRIVATE KEY-----)[A-Za-z0-9+/=\s]+?(?:-----END[A-Z ]* PRIVATE KEY-----|$)`)},
}

// scrubTokens redacts every token of tokenRules in s, keeping its prefix.
func scrubTokens(s string) string {
	for _, r := range tokenRules {
		if containsAny(s, r.hints) && r.re.MatchString(s) {
			s = r.re.ReplaceAllString(s, "${1}"+Redacted)
		}
	}
	return s
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TokenFormats names the credential formats Scrub recognises on their
// own, for documentation.
func TokenFormats() []string {
	out := make([]string, len(tokenRules))
	for i, r := range tokenRules {
		out[i] = r.name
	}
	return out
}
