// Package jsonutil holds the JSON helpers that package jobs and the
// internal packages share: strict decoding with error messages a caller can
// act on (DecodeStrict, DescribeJSONError, JSONKind) and the appenders that
// write JSON without reflection (AppendString, AppendTime, AppendUUID).
//
// It imports no Flint package, so that jobs, whose public surface must not
// carry these helpers, can import it.
package jsonutil
