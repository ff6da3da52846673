// Package jsontest holds what the tests of hand-written JSON encoders
// share: a value filled at random, field by field, and what
// encoding/json writes for it, to compare the encoder's output with.
// Only _test.go files import it.
package jsontest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// StdJSON is what encoding/json writes for v, without HTML escaping: what
// a hand-written encoder of v must write.
func StdJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(buf.String(), "\n")
}

// awkwardStrings are strings an encoder must escape or keep as they are.
var awkwardStrings = []string{"", "noop", "emails.send", `quote " and \ backslash`, "tab\tnewline\n", "<b>&amp;</b>",
	"ünïcødé ✓", "\u2028 line separator", "bad utf-8 \xff\xfe", "nul \x00", "del \x7f"}

// Fill sets every exported field of v (a pointer to a struct) to a random
// non-zero value, so that a field the hand-written encoder forgets shows.
func Fill(r *rand.Rand, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		fillValue(r, f)
	}
}

// fillValue sets f to a random non-zero value of its type.
func fillValue(r *rand.Rand, f reflect.Value) {
	switch f.Interface().(type) {
	case uuid.UUID:
		f.Set(reflect.ValueOf(uuid.New()))
		return
	case time.Time:
		zones := []*time.Location{time.UTC, time.FixedZone("x", 3600+1800), time.FixedZone("y", -7*3600)}
		t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		if r.IntN(3) == 0 {
			t = t.Truncate(time.Second)
		}
		f.Set(reflect.ValueOf(t))
		return
	case json.RawMessage:
		docs := []string{`{"n": 1, "s" : "<b>"}`, `{}`, "{\n  \"a\": [1, 2.5, null, true],\n  \"u\": \"\\u00e9\"\n}", `"text"`, `42`}
		f.Set(reflect.ValueOf(json.RawMessage(docs[r.IntN(len(docs))])))
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(awkwardStrings[r.IntN(len(awkwardStrings))])
	case reflect.Int, reflect.Int64, reflect.Int32:
		f.SetInt(r.Int64N(2000) - 1000)
	case reflect.Float64:
		vals := []float64{1, 2, 3, 1.5, 2.718281828459045, 1.0000001, 0.5, 1e-7, 1e22, 0}
		f.SetFloat(vals[r.IntN(len(vals))])
	case reflect.Bool:
		f.SetBool(r.IntN(2) == 0)
	case reflect.Pointer:
		if r.IntN(4) == 0 {
			f.SetZero()
			return
		}
		p := reflect.New(f.Type().Elem())
		fillValue(r, p.Elem())
		f.Set(p)
	case reflect.Map:
		f.Set(reflect.MakeMap(f.Type())) // Parents, Signals: never encoded
	case reflect.Slice:
		f.SetZero() // Steps: never encoded
	case reflect.Struct:
		Fill(r, f)
	default:
		panic("fill: no rule for " + f.Type().String())
	}
}
