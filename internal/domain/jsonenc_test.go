package domain

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/jsonutil/jsontest"
)

func TestEventAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		var e Event
		jsontest.Fill(r, reflect.ValueOf(&e).Elem())
		require.Equal(t, jsontest.StdJSON(t, &e), string(e.AppendJSON(nil)), "event %d", i)
	}
}
