package secret

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURL(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name, in, want string
	}{
		{"Empty", "", ""},
		{"URLWithPassword", "postgres://app:" + testDatabasePassword + "@db:5432/hookinbox?sslmode=require", "postgres://app:xxxxx@db:5432/hookinbox?sslmode=require"},
		{"URLWithEscapedPassword", "postgresql://app:p%40ss%2Fword@db/hookinbox", "postgresql://app:xxxxx@db/hookinbox"},
		{"URLWithoutPassword", "postgres://app@db/hookinbox", "postgres://app@db/hookinbox"},
		{"URLWithoutUser", "postgres:///hookinbox?host=/var/run/postgresql", "postgres:///hookinbox?host=/var/run/postgresql"},
		{"URLPasswordInQuery", "postgres://db/hookinbox?user=app&password=" + testDatabasePassword, "postgres://db/hookinbox?password=xxxxx&user=app"},
		{"URLUnparseable", "postgres://app:" + testDatabasePassword + "@db:port/hookinbox", "xxxxx"},
		{"URLPasswordWithUnescapedSlash", "postgres://app:123/" + testDatabasePassword + "@db/hookinbox", "xxxxx"},
		{"DSN", "host=db user=app password=" + testDatabasePassword + " dbname=hookinbox", "host=db user=app password=xxxxx dbname=hookinbox"},
		{"DSNQuotedPassword", "host=db password = 'it''s " + testDatabasePassword + "' sslpassword=" + testDatabasePassword, "xxxxx"},
		{"DSNQuotedEscapedPassword", `host=db password='a \' ` + testDatabasePassword + `' application_name='my app'`, "host=db password=xxxxx application_name='my app'"},
		{"DSNUnparseable", "host=db password='" + testDatabasePassword, "xxxxx"},
	} {
		got := URL(tt.in).String()
		require.Equal(t, tt.want, got, tt.name)
		require.NotContains(t, got, testDatabasePassword, tt.name)
	}
}

func TestParseDSN(t *testing.T) {
	t.Parallel()

	pairs, err := parseDSN("  host=db port = 5432\tpassword='a b\\'c' empty='' dbname=x\\ y ")
	require.NoError(t, err)
	require.Equal(t, []dsnPair{
		{"host", "db"}, {"port", "5432"}, {"password", "a b'c"}, {"empty", ""}, {"dbname", "x y"},
	}, pairs)

	for _, bad := range []string{"", "   ", "localhost", "=x", "host", "my key=x", "host=x password='y", "postgres://x/y?a=b"} {
		_, err := parseDSN(bad)
		require.Error(t, err, bad)
	}
}

// testDatabasePassword must never appear in a URL's String.
const testDatabasePassword = "PW-must-not-leak"
