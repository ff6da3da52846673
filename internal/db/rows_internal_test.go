package db

import (
	"reflect"
	"strings"
	"testing"
)

// TestJobRowTargets: jobRow.targets names every field of jobRow, in the
// struct's order, which is jobColumns' order (the order
// RowToAddrOfStructByPos, which it replaces, scanned them in).
func TestJobRowTargets(t *testing.T) {
	r := new(jobRow)
	v := reflect.ValueOf(r).Elem()
	got := r.targets()
	if len(got) != v.NumField() {
		t.Fatalf("targets has %d fields, jobRow %d", len(got), v.NumField())
	}
	for i, target := range got {
		if want := v.Field(i).Addr().Interface(); target != want {
			t.Errorf("target %d is not jobRow.%s", i, v.Type().Field(i).Name)
		}
	}
	if n := strings.Count(jobColumns, ",") + 1; n != v.NumField() {
		t.Errorf("jobColumns has %d columns, jobRow %d fields", n, v.NumField())
	}
}
