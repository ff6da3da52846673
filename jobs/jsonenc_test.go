package jobs

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/jsonutil/jsontest"
)

func TestJobAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var j Job
		jsontest.Fill(r, reflect.ValueOf(&j).Elem())
		if i%5 == 0 {
			j = Job{ID: j.ID, Type: "noop", Queue: "default", Payload: json.RawMessage(`{}`), Status: StateQueued}
		}
		want := jsontest.StdJSON(t, &j)
		got := string(j.AppendJSON(nil))
		require.Equal(t, want, got, "job %d", i)
		require.True(t, json.Valid([]byte(got)))
	}
}

// A stored document that is not JSON cannot break the document around it.
func TestJobAppendJSONInvalidPayload(t *testing.T) {
	j := Job{ID: uuid.New(), Payload: json.RawMessage(`{"unterminated": `)}
	out := j.AppendJSON(nil)
	require.True(t, json.Valid(out), string(out))
	require.Contains(t, string(out), `"payload":null`)
}
