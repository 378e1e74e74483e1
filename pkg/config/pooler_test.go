package config

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestPooler(t *testing.T) {
	t.Parallel()

	t.Run("QueryModeDefaultsToPgxsOwnWithoutAPooler", func(t *testing.T) {
		t.Parallel()
		cfg := &Config{}
		cfg.ApplyDefaults()
		require.Equal(t, PoolerNone, cfg.Database.Pooler)
		require.Equal(t, "cache_statement", cfg.Database.QueryMode)
		require.Equal(t, pgx.QueryExecModeCacheStatement, cfg.Database.QueryExecMode())
	})

	t.Run("QueryModeDefaultsToExecBehindATransactionPooler", func(t *testing.T) {
		t.Parallel()
		cfg := &Config{Database: DatabaseConfig{Pooler: PoolerTransaction}}
		cfg.ApplyDefaults()
		require.Equal(t, "exec", cfg.Database.QueryMode)
		require.True(t, cfg.Database.TransactionPooled())
	})

	t.Run("QueryModeSetIsKept", func(t *testing.T) {
		t.Parallel()
		cfg := &Config{Database: DatabaseConfig{Pooler: PoolerTransaction, QueryMode: "simple_protocol"}}
		cfg.ApplyDefaults()
		require.Equal(t, "simple_protocol", cfg.Database.QueryMode)
	})

	t.Run("EveryModeMapsToPgxsMode", func(t *testing.T) {
		t.Parallel()
		want := map[string]pgx.QueryExecMode{
			"cache_statement": pgx.QueryExecModeCacheStatement, "cache_describe": pgx.QueryExecModeCacheDescribe,
			"describe_exec": pgx.QueryExecModeDescribeExec, "exec": pgx.QueryExecModeExec,
			"simple_protocol": pgx.QueryExecModeSimpleProtocol,
		}
		require.Len(t, queryModeNames(), len(want))
		for _, name := range queryModeNames() {
			d := &DatabaseConfig{QueryMode: name}
			require.Equal(t, want[name], d.QueryExecMode(), name)
			// The names are those of pgx's own URL option.
			cfg, err := pgx.ParseConfig("postgres://h/db?default_query_exec_mode=" + name)
			require.NoError(t, err)
			require.Equal(t, want[name], cfg.DefaultQueryExecMode, name)
		}
	})
}
