package db_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

func TestRedisURLForms(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"redis://127.0.0.1:6379/0",
		"rediss://user:pw@redis.example:6380/2",
		"redis-sentinel://s1:26379,s2:26379,s3/mymaster",
		"redis-sentinel://:pw@s1:26379/mymaster/3?sentinel_password=spw",
		"redis://s1:26379/0?master_name=mymaster&addr=s2:26379",
	} {
		require.NoError(t, db.CheckRedisURL(ok), ok)
	}
	for bad, want := range map[string]string{
		"memcached://x:11211":                         "scheme",
		"redis-sentinel://s1:26379":                   "master's name",
		"redis-sentinel://s1:notaport/m":              "port",
		"redis-sentinel://s1:26379/m/zero":            "database number",
		"redis-sentinel://s1:26379/m?unknown=1":       "unknown",
		"redis://:s3cretpw@h:6379/0?master_name=m&x=": "x",
	} {
		err := db.CheckRedisURL(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "REDIS_URL")
		require.Contains(t, err.Error(), want, bad)
		require.NotContains(t, err.Error(), "s3cretpw")
	}
}

// TestRedisFollowsSentinelFailover: with REDIS_URL naming a Sentinel, the
// fast path follows the master to the promoted replica.
func TestRedisFollowsSentinelFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Redis servers and a Sentinel")
	}
	s := dbtest.StartRedisSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, u := range []string{s.URL(), "redis://" + s.SentinelAddr() + "/0?master_name=" + s.Name} {
		r, err := db.OpenRedis(ctx, u, "flinttest:", logger)
		require.NoError(t, err)
		require.True(t, r.Healthy(), u)
		require.NoError(t, r.Client().Set(ctx, "flinttest:k", "before", 0).Err())
		require.NoError(t, r.Close())
	}
	r, err := db.OpenRedis(ctx, s.URL(), "flinttest:", logger)
	require.NoError(t, err)
	defer r.Close()

	s.Failover()
	// Right after the switch the old master may still take a write (which
	// it then loses: Redis is only ever a hint to Flint); soon every write
	// goes to the promoted replica.
	promoted := s.Replica.Client()
	n := 0
	require.Eventually(t, func() bool {
		n++
		v := fmt.Sprintf("after-%d", n)
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return r.Client().Set(wctx, "flinttest:k", v, 0).Err() == nil && promoted.Get(wctx, "flinttest:k").Val() == v
	}, 30*time.Second, 100*time.Millisecond, "writes reach the promoted replica")
}
