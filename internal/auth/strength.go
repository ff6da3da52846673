package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
)

// Secret strength. Production refuses a configured key that `flint secret`
// did not make and whose strength zxcvbn (the maintained estimator that
// knows words, names, dates, keyboard walks, sequences and l33t) puts
// below MinKeyBits, and an admin password below MinPasswordBits.
const (
	// MinKeyBits is what a key (FLINT_API_KEY, FLINT_SESSION_KEY) needs
	// when `flint secret` did not make it: log2 of zxcvbn's guesses, out
	// of reach of an offline search for as long as anyone can plan. zxcvbn
	// counts a random character as about 3.3 bits, so a random key needs
	// about 40 characters (openssl rand -hex 32 has 64).
	MinKeyBits = 128
	// MinPasswordBits is what a dashboard password given in configuration
	// needs, as log2 of zxcvbn's guesses: checked with bcrypt and guessed
	// online through the sign-in throttle, so less than a key's, but far
	// more than a word with a year and a symbol (about 25).
	MinPasswordBits = 48
)

// GeneratedSecretPrefix starts every secret `flint secret` prints (the
// version of its format follows "flint_s"), so a leaked one is
// recognisable, and its last six characters are a checksum of the rest,
// so a secret cut short or mistyped is told apart from a generated one.
const GeneratedSecretPrefix = "flint_s1_"

// generatedBytes is the random part of a generated secret: 256 bits.
const generatedBytes = 32

// generatedLen is the length of a generated secret: prefix, the random
// bytes in base64url, and the checksum (four bytes, six characters).
var generatedLen = len(GeneratedSecretPrefix) + base64.RawURLEncoding.EncodedLen(generatedBytes) + 6

// NewSecret returns a new machine secret: GeneratedSecretPrefix, 256
// random bits in base64url and a checksum. `flint secret` prints one;
// production accepts it for any key or password setting.
func NewSecret() string {
	var b [generatedBytes]byte
	_, _ = rand.Read(b[:])
	body := GeneratedSecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return body + secretChecksum(body)
}

// secretChecksum is the CRC-32 of body in six base64url characters.
func secretChecksum(body string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(body)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// GeneratedSecret reports whether s is a secret NewSecret made: its
// prefix, length and checksum.
func GeneratedSecret(s string) bool {
	if len(s) != generatedLen || !strings.HasPrefix(s, GeneratedSecretPrefix) {
		return false
	}
	body := s[:len(s)-6]
	return secretChecksum(body) == s[len(s)-6:]
}

// maxEstimated is how many characters of a secret the estimate reads:
// zxcvbn's search grows with the square of the length, and past this the
// estimate of the start is already far above any threshold.
const maxEstimated = 100

// GuessBits is log2 of the guesses zxcvbn estimates secret takes, given
// words an attacker would try first (the email it goes with, the
// product's name). Invalid UTF-8 is worth nothing.
func GuessBits(secret string, userInputs ...string) float64 {
	if secret == "" || !utf8.ValidString(secret) {
		return 0
	}
	if r := []rune(secret); len(r) > maxEstimated {
		secret = string(r[:maxEstimated])
	}
	inputs := append([]string{"flint", "flinthq", "jobs", "queue", "worker", "secret", "session", "apikey"}, userInputs...)
	return math.Log2(max(zxcvbn.PasswordStrength(secret, inputs).Guesses, 1))
}

// CheckMachineSecret reports whether value may serve as a machine secret
// in production: one `flint secret` made, or one zxcvbn estimates at
// MinKeyBits or more. The error says why without quoting the value.
func CheckMachineSecret(value string) error {
	if GeneratedSecret(value) {
		return nil
	}
	if strings.HasPrefix(value, GeneratedSecretPrefix) {
		return fmt.Errorf("starts like a `flint secret` value but its checksum does not match: it was cut short or mistyped")
	}
	if bits := GuessBits(value); bits < MinKeyBits {
		return fmt.Errorf("is too weak: about %d bits by zxcvbn's estimate, at least %d needed; use `flint secret` "+
			"(or at least 32 random bytes: openssl rand -hex 32)", int(bits), MinKeyBits)
	}
	return nil
}

// CheckPasswordStrength reports whether password is strong enough for a
// dashboard account given in production configuration, by zxcvbn's
// estimate (userInputs: the account's email and the like). The error says
// why without quoting the password.
func CheckPasswordStrength(password string, userInputs ...string) error {
	if GeneratedSecret(password) {
		return nil
	}
	if bits := GuessBits(password, userInputs...); bits < MinPasswordBits {
		return fmt.Errorf("is too weak: about %d bits by zxcvbn's estimate (a word, a name, a date, a keyboard walk "+
			"or a sequence is guessed first), at least %d needed", int(bits), MinPasswordBits)
	}
	return nil
}
