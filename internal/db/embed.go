package db

import "embed"

// FS holds the SQL migrations, embedded so the binary migrates itself.
//
//go:embed migrations/*.sql
var FS embed.FS
