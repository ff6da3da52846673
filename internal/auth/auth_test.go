package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/flinthq/flint/jobs"
)

func init() { BcryptCost = 4 }

func TestPasswordPolicy(t *testing.T) {
	for _, tc := range []struct {
		pw    string
		field string
	}{{"short", "password"}, {strings.Repeat("x", 73), "password"}, {"long enough", ""}, {strings.Repeat("x", 72), ""}} {
		_, err := HashPassword(tc.pw)
		if tc.field == "" {
			require.NoError(t, err, "%d bytes", len(tc.pw))
			continue
		}
		var ve *jobs.ValidationError
		require.True(t, errors.As(err, &ve), "%d bytes: %v", len(tc.pw), err)
		require.Equal(t, tc.field, ve.Field)
	}
}

func TestVerifyPassword(t *testing.T) {
	hash, err := HashPassword("correct horse")
	require.NoError(t, err)
	require.NoError(t, VerifyPassword(hash, "correct horse"))
	require.ErrorIs(t, VerifyPassword(hash, "wrong horse"), ErrBadLogin)
	require.ErrorIs(t, VerifyPassword("", "correct horse"), ErrBadLogin, "no such user")
}

func TestHashToken(t *testing.T) {
	a, b := HashToken("token-a"), HashToken("token-b")
	require.Len(t, a, 64)
	require.NotEqual(t, a, b)
	require.Equal(t, a, HashToken("token-a"))
	require.NotContains(t, a, "token-a")
}

// TestDummyHashCost: the hash an unknown email is compared against is a
// valid bcrypt hash at the default cost, so a wrong email takes as long
// as a wrong password, and it matches no password a caller would send.
func TestDummyHashCost(t *testing.T) {
	cost, err := bcrypt.Cost(dummyHash)
	require.NoError(t, err)
	require.Equal(t, bcrypt.DefaultCost, cost)
	require.ErrorIs(t, VerifyPassword("", "not a real password"), ErrBadLogin)
}
