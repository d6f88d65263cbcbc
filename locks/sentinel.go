package locks

import (
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// newSentinelLua is the textbook lock (SET NX PX, Lua compare-and-delete)
// against a master found through Redis Sentinel: Config.Addrs are the
// Sentinels' addresses. go-redis's failover client asks a Sentinel for the
// master by name before each new connection and drops its connections to a
// master Sentinel has replaced (it listens for +switch-master), so after a
// failover the client follows the new master. Replication is asynchronous:
// a grant the old master had not passed on is lost with it, and the new
// master hands the lock out again.
//
// As for the single-instance schemes, automatic retries are off (MaxRetries
// -1): a SET NX retried after a lost reply would find the client's own key
// and report the lock held by somebody else.
func newSentinelLua(c Config) (Lock, error) {
	if len(c.Addrs) == 0 {
		return nil, errors.New("redis-sentinel scheme needs the sentinels' addresses")
	}
	if c.Server.SentinelMaster == "" {
		return nil, errors.New("redis-sentinel scheme needs the name Sentinel monitors the master under (Config.Server)")
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            c.Server.SentinelMaster,
		SentinelAddrs:         c.Addrs,
		MaxRetries:            -1,
		DialTimeout:           c.OpTimeout,
		ReadTimeout:           c.OpTimeout,
		WriteTimeout:          c.OpTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              2,
		Protocol:              2,
		DisableIdentity:       true,
	})
	return lua{&redisBase{cfg: c, rdb: rdb}}, nil
}
