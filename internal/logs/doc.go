// Package logs is Flint's logging: a log/slog logger that scrubs secrets,
// writes to stdout (and, when asked, to a size-rotated file), and ships its
// entries to the database, where the Logs page reads those of every Flint
// process.
//
// # Outputs
//
// New(Config) returns a Logger. Every record goes to stdout in the configured
// format (JSON or text) and, when Config.File is set, to that file through
// lumberjack (rotated at MaxSizeMB, MaxBackups kept, 10 MB and 5 by default,
// optional gzip of backups). The file is always JSON, one record per line,
// whatever the stdout format. Lines longer than MaxLineBytes (64 KiB) reach
// the file and the database shortened to their time, level, message,
// component and job id.
//
// # Scrubbing
//
// A wrapping slog.Handler redacts secrets before any output (stdout, file or
// database) sees the record. Values are replaced by "[REDACTED]":
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
// # Shipping
//
// Every scrubbed record is also copied, as its JSON line, into a bounded
// buffer (10,000 entries, 8 MiB). Logger.Ship writes the buffer to a Sink
// (the process_logs table) every second, or as soon as a batch of 1,000 is
// waiting, tagged with the Process (its id, host and role). Recording
// never waits for a write: a full buffer, or a write that fails, drops
// entries and counts them, and the next write stores one DroppedMessage
// entry with the count. Lines are parsed into Entry values only on the
// writer's goroutine. Stdout keeps the complete record whatever happens to
// the database copy.
//
// # Reading
//
// Query, its Validate and Cursor describe a read of the stored log (newest
// first by time, then id) for the stores that implement it; invalid
// queries yield *QueryError.
//
// # Where to start reading
//
// logs.go has New, Config and the Logger; scrub_handler.go the slog
// handler that wraps every output, with the rules in scrub_keys.go (which
// keys are secret), scrub.go (free text) and scrub_json.go (JSON values);
// ship.go the buffer and the Sink; entry.go the stored Entry and its Query.
//
// logs imports only the standard library, uuid and lumberjack: it knows
// nothing of jobs or the database.
package logs
