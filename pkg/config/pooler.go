package config

import (
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The values of database.pooler.
const (
	// PoolerNone means every connection is a session of its own on the
	// server: direct, or through a pooler in session mode.
	PoolerNone = "none"
	// PoolerTransaction means a pooler hands a server connection to a client
	// for one transaction at a time (PgBouncer's pool_mode = transaction):
	// nothing may outlive a transaction on a connection.
	PoolerTransaction = "transaction"
)

// queryModes maps database.query_mode's values, the names pgx's
// default_query_exec_mode option gives them, to pgx's modes.
var queryModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
}

// queryModeNames returns the values of database.query_mode.
func queryModeNames() []string {
	names := make([]string, len(queryModes))
	for i, m := range queryModes {
		names[i] = m.name
	}
	return names
}

// pooledQueryModes are the query modes that work through a transaction
// pooler: each round trip stands alone, with no named prepared statement
// (cache_statement) and no unnamed one carried over to the next round trip
// (describe_exec).
var pooledQueryModes = []string{"cache_describe", "exec", "simple_protocol"}

// QueryExecMode returns the pgx mode database.query_mode names;
// cache_statement, pgx's default, for an unknown name (Validate refuses one).
func (d *DatabaseConfig) QueryExecMode() pgx.QueryExecMode {
	for _, m := range queryModes {
		if m.name == d.QueryMode {
			return m.mode
		}
	}
	return pgx.QueryExecModeCacheStatement
}

// TransactionPooled reports whether database.pooler is "transaction".
func (d *DatabaseConfig) TransactionPooled() bool { return d.Pooler == PoolerTransaction }

// validatePooler checks database.pooler and database.query_mode, and that
// the URL does not set pgx's default_query_exec_mode behind the key's back.
func (d *DatabaseConfig) validatePooler(p *problems) {
	if !slices.Contains([]string{PoolerNone, PoolerTransaction}, d.Pooler) {
		p.addf("database.pooler", "must be none or transaction, not %q", d.Pooler)
	}
	switch {
	case !slices.Contains(queryModeNames(), d.QueryMode):
		p.addf("database.query_mode", "must be one of %s, not %q", strings.Join(queryModeNames(), ", "), d.QueryMode)
	case d.TransactionPooled() && !slices.Contains(pooledQueryModes, d.QueryMode):
		p.addf("database.query_mode", "%s does not work behind a transaction pooler (database.pooler: transaction), "+
			"which may run each round trip on another server connection, where the statement %s prepared does not exist; use %s",
			d.QueryMode, d.QueryMode, strings.Join(pooledQueryModes, ", "))
	}
	if d.URL.HasParam("default_query_exec_mode") {
		p.addf("database.url", "sets default_query_exec_mode; set database.query_mode instead")
	}
}
