// Package migrations embeds hookinbox's SQL migrations. Files are named
// NNNN_name.up.sql and NNNN_name.down.sql and applied in NNNN order by
// pkg/schema.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
