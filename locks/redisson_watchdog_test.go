package locks_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
)

// Redisson's watchdog meets renewals that fail for a while (the server
// refuses EVAL/EVALSHA through an ACL, less than the TTL) and then work
// again. Since 3.44 (RenewalTask) it logs and reschedules: the lease lives
// on. Before 3.44 (RedissonBaseLock.renewExpiration) it gives up once the
// command failed through its retries: the lease runs out under a holder
// that goes on believing.
func TestRedissonWatchdogOnRenewalError(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	addr := cl.Addrs()[0]
	admin := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = admin.Close() })
	s := lookup(t, "redisson")
	ttl := 1500 * time.Millisecond
	tests := []struct {
		name   string
		params map[string]string
		alive  bool // the lock key still exists after the TTL
	}{
		{"default (>= 3.44 reschedules)", nil, true},
		{"redisson-watchdog=pre-3.44 gives up", map[string]string{"redisson-watchdog": "pre-3.44"}, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			key := "k:redisson-dog-" + tt.params["redisson-watchdog"]
			l, err := s.New(locks.Config{Addrs: []string{addr}, Key: key, TTL: ttl, OpTimeout: 100 * time.Millisecond, Client: i, Params: tt.params})
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			_, err = l.Acquire(ctx)
			require.NoError(t, err)
			t0 := time.Now()
			// Renewals fail from the first (TTL/3) through the pre-3.44
			// retries (3 x TTL/20), and work again before the next
			// (2 TTL/3).
			require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "-eval", "-evalsha").Err())
			restore := func() { _ = admin.Do(ctx, "ACL", "SETUSER", "default", "+@all").Err() }
			t.Cleanup(restore)
			time.Sleep(time.Until(t0.Add(ttl * 6 / 10)))
			restore()
			time.Sleep(time.Until(t0.Add(ttl * 3 / 2)))
			n, err := admin.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, tt.alive, n == 1, "lock key alive %.1f TTL after the grant", 1.5)
		})
	}
}
