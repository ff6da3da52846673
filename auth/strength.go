package auth

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Secret strength. Production refuses a configured key or password whose
// estimated entropy is below these; a random secret of the recommended
// size passes with room to spare.
const (
	// MinKeyBits is what a key (FLINT_API_KEY, FLINT_SESSION_KEY) needs:
	// out of reach of an offline search for as long as anyone can plan.
	MinKeyBits = 128
	// MinPasswordBits is what a dashboard password given in configuration
	// needs. It is checked with bcrypt and guessed online through the
	// sign-in throttle, so less than a key's, but far more than a word and
	// a few digits.
	MinPasswordBits = 64
)

// NewSecret returns 256 random bits as 64 hex characters: enough for any
// of Flint's keys, and short enough for a password (bcrypt reads 72 bytes).
// `flint secret` prints one.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Strength is an estimate of how hard a secret is to guess.
type Strength struct {
	// Bits is the estimated entropy.
	Bits float64
	// Flaws say, without quoting the secret, what lowered the estimate
	// ("only digits", "a run of 7 characters in sequence", ...).
	Flaws []string
}

// minPattern is the shortest run or repeat the estimate discounts. Random
// strings hold short ones often: with 5, about one random 128-bit hex key
// in 600 loses some bits, against one in 40 with 4.
const minPattern = 5

// maxEstimated is how many characters of a secret the estimate reads.
const maxEstimated = 256

// commonWords are what people build weak secrets from. A secret made of
// them is discounted to the cost of picking them from this list.
var commonWords = []string{
	"password", "passw0rd", "admin", "administrator", "root", "toor", "user",
	"guest", "login", "master", "secret", "changeme", "default", "welcome",
	"letmein", "iloveyou", "dragon", "monkey", "sunshine", "princess",
	"football", "baseball", "shadow", "superman", "trustno1", "hello",
	"test", "flint", "qwerty", "qwertz", "azerty", "asdfgh", "zxcvbn",
	"abc123", "token", "apikey", "session",
}

// EstimateStrength estimates the entropy of secret: each character is
// worth log2 of the alphabet its character classes span (digits 10, hex
// 16, lower and upper case 26 each, ASCII symbols 33), except that runs in
// sequence ("1234567", "aaaaa", "fedcb"), repeats of an earlier part
// ("abcdabcd…") and common words cost only what it takes to say them. The
// cheapest reading of the whole secret is the estimate, so a secret of
// random characters scores close to its real entropy and one built from
// patterns far below it.
func EstimateStrength(secret string) Strength {
	if secret == "" || !utf8.ValidString(secret) {
		return Strength{Flaws: []string{"empty or not UTF-8"}}
	}
	rs := []rune(secret)
	// The search below is cubic in the worst case; past this length the
	// estimate of the start is already far above any threshold.
	if len(rs) > maxEstimated {
		rs = rs[:maxEstimated]
	}
	alphabet, classFlaw := alphabetOf(rs)
	r := newReading(rs, math.Log2(float64(alphabet)))
	for i := range rs {
		r.relax(i, i+1, r.perChar, "")
		r.sequence(i)
		r.repeat(i)
		r.commonWord(i)
	}
	s := Strength{Bits: r.cost[len(rs)]}
	if classFlaw != "" {
		s.Flaws = append(s.Flaws, classFlaw)
	}
	s.Flaws = append(s.Flaws, r.flaws()...)
	return s
}

// reading is the search behind EstimateStrength: the cheapest way to
// describe a secret, one step at a time, where a step is one character
// (perChar bits) or a pattern starting at that position.
type reading struct {
	rs      []rune
	lower   []rune // rs in lower case, for common words
	perChar float64
	// cost[i] is the cheapest description of rs[:i]; how[i] the step that
	// reached it, to name the flaws of the cheapest reading.
	cost []float64
	how  []readingStep
}

// readingStep is the step that reached a position: where it started and
// the flaw it stands for ("" for a single character).
type readingStep struct {
	from int
	flaw string
}

func newReading(rs []rune, perChar float64) *reading {
	n := len(rs)
	r := &reading{rs: rs, lower: make([]rune, n), perChar: perChar, cost: make([]float64, n+1), how: make([]readingStep, n+1)}
	for i, c := range rs {
		r.lower[i] = unicode.ToLower(c)
	}
	for i := 1; i <= n; i++ {
		r.cost[i] = math.Inf(1)
	}
	return r
}

// relax records that rs[from:to] can be said in c bits, if that makes
// rs[:to] cheaper.
func (r *reading) relax(from, to int, c float64, flaw string) {
	if r.cost[from]+c < r.cost[to] {
		r.cost[to] = r.cost[from] + c
		r.how[to] = readingStep{from, flaw}
	}
}

// sequence prices runs in sequence starting at i: the first character, the
// direction (up, down or the same) and the length.
func (r *reading) sequence(i int) {
	rs, n := r.rs, len(r.rs)
	if i+1 >= n {
		return
	}
	d := rs[i+1] - rs[i]
	if d < -1 || d > 1 {
		return
	}
	j := i + 2
	for j < n && rs[j]-rs[j-1] == d {
		j++
	}
	for end := i + minPattern; end <= j; end++ {
		r.relax(i, end, r.perChar+math.Log2(3)+math.Log2(float64(end-i)), "a run of characters in sequence or repeated")
	}
}

// repeat prices repeats at i of an earlier part (it may overlap itself, as
// in a string made of one short part many times): where it starts and how
// long it is.
func (r *reading) repeat(i int) {
	rs, n := r.rs, len(r.rs)
	if i == 0 {
		return
	}
	longest := 0
	for k := 0; k < i; k++ {
		l := 0
		for i+l < n && rs[k+l] == rs[i+l] {
			l++
		}
		longest = max(longest, l)
	}
	for end := i + minPattern; end <= i+longest; end++ {
		r.relax(i, end, math.Log2(float64(i))+math.Log2(float64(end-i)), "a part repeated")
	}
}

// commonWord prices a common word, in any case, starting at i.
func (r *reading) commonWord(i int) {
	for _, w := range commonWords {
		wr := []rune(w)
		if i+len(wr) <= len(r.rs) && string(r.lower[i:i+len(wr)]) == w {
			r.relax(i, i+len(wr), math.Log2(float64(len(commonWords)))+1, "a common word")
		}
	}
}

// flaws names, once each and in order, the patterns of the cheapest
// reading of the whole secret.
func (r *reading) flaws() []string {
	seen := map[string]bool{}
	var flaws []string
	for i := len(r.rs); i > 0; i = r.how[i].from {
		if f := r.how[i].flaw; f != "" && !seen[f] {
			seen[f] = true
			flaws = append(flaws, f)
		}
	}
	slices.Reverse(flaws)
	return flaws
}

// alphabetOf is the size of the alphabet the characters of rs are drawn
// from, judged by their classes, and a flaw when that is a small one.
func alphabetOf(rs []rune) (int, string) {
	var lower, upper, digit, symbol, other bool
	hexLower, hexUpper := true, true
	for _, r := range rs {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
			hexUpper = false
			if r > 'f' {
				hexLower = false
			}
		case r >= 'A' && r <= 'Z':
			upper = true
			hexLower = false
			if r > 'F' {
				hexUpper = false
			}
		case r >= '0' && r <= '9':
			digit = true
		case r >= ' ' && r <= '~':
			symbol = true
		default:
			other = true
		}
	}
	switch {
	case digit && !lower && !upper && !symbol && !other:
		return 10, "only digits"
	case !symbol && !other && (hexLower || hexUpper):
		return 16, ""
	}
	size := 0
	for _, c := range []struct {
		in   bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {symbol, 33}, {other, 100}} {
		if c.in {
			size += c.size
		}
	}
	if size <= 26 {
		return size, "only one case of letters"
	}
	return size, ""
}
