// Package logs is Flint's logging: a log/slog logger that scrubs secrets,
// writes to stdout and to a size-rotated file, serves the file back to the
// log API, and feeds an in-process live tail.
//
// # Outputs
//
// New(Config) returns a Logger. Every record goes to stdout in the configured
// format (JSON or text) and, when Config.File is set, to that file through
// lumberjack (rotated at MaxSizeMB, MaxBackups kept, 10 MB and 5 by default,
// optional gzip of backups). The file is always JSON, one record per line,
// whatever the stdout format, so that Read can parse it. Lines longer than
// MaxLineBytes (64 KiB) reach the file and the tail shortened to their time,
// level, message, component and job id.
//
// # Scrubbing
//
// A wrapping slog.Handler redacts secrets before any output (stdout, file or
// tail) sees the record. Values are replaced by "[REDACTED]":
//
//   - the whole value of an attribute, at any group depth, whose key looks
//     secret: case-insensitively it contains password, passwd, passphrase,
//     secret, token, api_key / apikey / api-key (so x-api-key), authorization,
//     cookie (so set-cookie), session, csrf, xsrf, private_key, credential
//     (so smtp_password, client_secret, access_token …), or has a word auth,
//     pass, pwd, bearer or dsn ("auth", "smtp_pass"; not "author"). A group
//     so named (slog.Group or WithGroup) is redacted whole;
//   - in the message and every string value (errors included): the password
//     of URL userinfo (scheme://user:[REDACTED]@host), Bearer and Basic
//     credentials, and key=value, key: value, "key":"value" pairs whose key
//     looks secret;
//   - in JSON payloads logged as json.RawMessage, []byte or a string holding
//     JSON, and in maps, slices and structs (as encoding/json renders them):
//     every field named like a secret, at any depth, and the strings as
//     above. The result stays valid JSON.
//
// Scrub, ScrubAttr and IsSecretKey expose the same rules to other
// packages (emails, SSE, API responses). Text without a suspicious substring
// costs a single scan and no regular expression.
//
// # Reading
//
// Logger.Read returns entries newest first from the file and its backups,
// filtered by minimum level, job id, a case-insensitive substring and a
// start time, with an opaque cursor that identifies a file by its first line
// and a byte offset in it, so paging has no gaps or duplicates across
// rotations. Non-JSON and overlong lines, and a line still being written,
// are skipped. Invalid queries yield *QueryError.
//
// # Live tail
//
// Logger.Tail keeps the last RingSize scrubbed entries, numbered as they are
// recorded; the live log page polls it for those after the last it showed
// (Tail.Since). Recording never blocks the logger on a reader: it copies
// the line into the ring, and entries are parsed only when read.
package logs
