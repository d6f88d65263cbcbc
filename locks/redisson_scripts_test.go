package locks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
)

// Redisson's own scripts, verbatim from redisson/src/main/java/org/redisson
// (master, as in /work/notes/sources): the acquire of
// RedissonLock.tryLockInnerAsync (RedissonLock.java lines 214-224), the
// unlock of RedissonLock.unlockInnerAsync (lines 347-371) and the renewal
// of renewal/LockTask.renew (LockTask.java lines 84-93).
var (
	redissonTryLockInner = redis.NewScript(
		"if ((redis.call('exists', KEYS[1]) == 0) " +
			"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
			"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
			"redis.call('pexpire', KEYS[1], ARGV[1]); " +
			"return nil; " +
			"end; " +
			"return redis.call('pttl', KEYS[1]);")
	redissonUnlockInner = redis.NewScript(
		"local val = redis.call('get', KEYS[3]); " +
			"if val ~= false then " +
			"return tonumber(val);" +
			"end; " +
			"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
			"return nil;" +
			"end; " +
			"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
			"if (counter > 0) then " +
			"redis.call('pexpire', KEYS[1], ARGV[2]); " +
			"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
			"return 0; " +
			"else " +
			"redis.call('del', KEYS[1]); " +
			"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
			"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
			"return 1; " +
			"end; ")
	redissonLockTaskRenew = redis.NewScript(
		"local result = {} " +
			"for i = 1, #KEYS, 1 do " +
			"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
			"redis.call('pexpire', KEYS[i], ARGV[1]); " +
			"table.insert(result, 1); " +
			"else " +
			"table.insert(result, 0); " +
			"end; " +
			"end; " +
			"return result;")
)

// redisState is what a step leaves in Redis: the lock hash, its remaining
// time to live (rounded to the second: the two keys are set a moment apart),
// and whether the unlock message went out.
type redisState struct {
	Hash        map[string]string
	PTTLSeconds int64
	Published   bool
}

// Per step, locktest's redisson scheme runs the script Redisson runs and
// decides as it does: the same reply, the same hash, the same expiry, the
// same unlock message, from the same server state, on a real Redis. The
// one difference on purpose: Redisson's unlock first reads an unlock latch
// (KEYS[3], set for the request id so that a retried unlock answers as the
// first one did); locktest sends each unlock once and has none, so every
// step starts without a latch.
func TestRedissonScriptsFollowRedissonLock(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cl.Addrs()[0]})
	t.Cleanup(func() { _ = rdb.Close() })
	const me, other, lease = "uuid-me:1", "uuid-other:1", int64(30000)

	type step struct {
		name   string
		source string            // the line of RedissonLock / LockTask the step follows
		before map[string]string // the lock hash before the step (nil: no key)
		pttl   int64             // its time to live before the step, ms
		run    string            // acquire, release or renew
		want   string            // the reply both must give
	}
	n := 0 // each step on keys of its own (an unlock latch lasts 5 s)
	for _, tc := range []step{
		{"acquire a free lock", "RedissonLock.java:216-220 exists == 0: hincrby, pexpire, nil", nil, 0, "acquire", "nil"},
		{"re-enter our own lock", "RedissonLock.java:217-220 hexists == 1: hincrby, pexpire, nil", map[string]string{me: "1"}, 5000, "acquire", "nil"},
		{"try a lock another holds", "RedissonLock.java:222 return pttl", map[string]string{other: "1"}, 5000, "acquire", "ttl"},
		{"release a lock not ours", "RedissonLock.java:354-356 hexists == 0: nil", map[string]string{other: "1"}, 5000, "release", "nil"},
		{"release a gone lock", "RedissonLock.java:354-356 hexists == 0: nil", nil, 0, "release", "nil"},
		{"release a nested hold", "RedissonLock.java:357-361 counter > 0: pexpire, 0", map[string]string{me: "2"}, 5000, "release", "0"},
		{"release the last hold", "RedissonLock.java:362-366 del, publish, 1", map[string]string{me: "1"}, 5000, "release", "1"},
		{"renew our lock", "LockTask.java:86-88 hexists == 1: pexpire, 1", map[string]string{me: "1"}, 5000, "renew", "1"},
		{"renew a lock not ours", "LockTask.java:89-90 else 0", map[string]string{other: "1"}, 5000, "renew", "0"},
		{"renew a gone lock", "LockTask.java:89-90 else 0", nil, 0, "renew", "0"},
	} {
		n++
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			var after [2]redisState
			for i, who := range []string{"locktest", "redisson"} {
				key := fmt.Sprintf("{k%d}:%s", n, who)
				channel := "redisson_lock__channel:" + key
				require.NoError(t, rdb.Del(ctx, key).Err())
				if tc.before != nil {
					require.NoError(t, rdb.HSet(ctx, key, tc.before).Err())
					require.NoError(t, rdb.PExpire(ctx, key, time.Duration(tc.pttl)*time.Millisecond).Err())
				}
				sub := rdb.Subscribe(ctx, channel)
				_, err := sub.Receive(ctx)
				require.NoError(t, err)
				var res *redis.Cmd
				switch {
				case tc.run == "acquire" && i == 0:
					res = locks.RedissonAcquireScript.Run(ctx, rdb, []string{key}, lease, me)
				case tc.run == "acquire":
					res = redissonTryLockInner.Run(ctx, rdb, []string{key}, lease, me)
				case tc.run == "release" && i == 0:
					res = locks.RedissonReleaseScript.Run(ctx, rdb, []string{key, channel}, 0, lease, me)
				case tc.run == "release":
					res = redissonUnlockInner.Run(ctx, rdb, []string{key, channel, key + ":latch"}, 0, lease, me, "publish", 5000)
				case i == 0:
					res = locks.RedissonRenewScript.Run(ctx, rdb, []string{key}, lease, me)
				default:
					res = redissonLockTaskRenew.Run(ctx, rdb, []string{key}, lease, me)
				}
				got[i] = reply(t, res, tc.run == "renew" && i == 1)
				hash, err := rdb.HGetAll(ctx, key).Result()
				require.NoError(t, err)
				pttl, err := rdb.PTTL(ctx, key).Result()
				require.NoError(t, err)
				msg, err := sub.ReceiveTimeout(ctx, 100*time.Millisecond)
				_, published := msg.(*redis.Message)
				require.True(t, published || err != nil)
				_ = sub.Close()
				after[i] = redisState{Hash: hash, PTTLSeconds: (pttl.Milliseconds() + 500) / 1000, Published: published}
			}
			require.Equal(t, tc.want, got[1], "Redisson's own script (%s)", tc.source)
			require.Equal(t, got[1], got[0], "the reply differs from Redisson's (%s)", tc.source)
			require.Equal(t, after[1], after[0], "the state left differs from Redisson's (%s)", tc.source)
		})
	}
}

// reply names a script's answer: nil, a number, or "ttl" for a positive
// time to live (the two runs read it a moment apart). The renewal of
// LockTask answers a list, one entry per lock: list says so.
func reply(t *testing.T, res *redis.Cmd, list bool) string {
	t.Helper()
	v, err := res.Result()
	if err == redis.Nil {
		return "nil"
	}
	require.NoError(t, err)
	if list {
		l, ok := v.([]any)
		require.True(t, ok, "LockTask answers a list: %v", v)
		require.Len(t, l, 1)
		v = l[0]
	}
	n, ok := v.(int64)
	require.True(t, ok, "a number: %v", v)
	if n > 1000 {
		return "ttl"
	}
	return fmt.Sprint(n)
}
