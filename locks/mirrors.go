package locks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// Mirror names the library or recipe a scheme writes out (history.Mirror).
type Mirror = history.Mirror

// Variant is a historical version of a scheme's library, chosen with
// --param Key=Value, kept on purpose because it shows a known hole.
type Variant struct {
	Scheme string
	Key    string
	Value  string
	Mirror Mirror
	// Hole is the failure this version has and the default does not.
	Hole string
}

// Param is Key=Value.
func (v Variant) Param() string { return v.Key + "=" + v.Value }

const (
	curatorLocks = "https://github.com/apache/curator/blob/master/curator-recipes/src/main/java/org/apache/curator/framework/recipes/locks/"
	redisDocs    = "https://redis.io/docs/latest/"
	zooRecipes   = "https://zookeeper.apache.org/doc/current/recipes.html#sc_recipes_Locks"
)

// Mirrors maps every scheme to what its default follows. A scheme without
// an entry fails TestEverySchemeMirrorsSomething.
var Mirrors = map[string]Mirror{
	"redis-setnx": {Library: "Redis SETNX page, \"Design pattern: Locking with SETNX\" (deprecated pattern)", Version: "Redis docs",
		Source: redisDocs + "commands/setnx/", Differs: "without the GETSET takeover of a stale lock the page describes"},
	"redis-setnx-expire": {Library: "SETNX then EXPIRE, the two-command recipe of many blog posts", Version: "folklore",
		Source: redisDocs + "commands/setnx/"},
	"redis-del": {Library: "Redis SET page, \"Patterns\": SET resource-name anystring NX PX, released by DEL", Version: "Redis docs",
		Source: redisDocs + "commands/set/"},
	"redis-get-del": {Library: "the check-then-delete release: GET the key, compare the owner in the client, then DEL (the non-atomic form the Redis lock pattern replaces with a Lua script)", Version: "Redis docs",
		Source:  redisDocs + "develop/clients/patterns/distributed-locks/",
		Differs: "the delete is issued as GETDEL, which deletes exactly as DEL does and also tells whose key went"},
	"redis-lua": {Library: "Redis \"Distributed Locks with Redis\", correct single-instance implementation", Version: "Redis docs",
		Source: redisDocs + "develop/clients/patterns/distributed-locks/"},
	"redis-lua-lenient": {Library: "Redis \"Distributed Locks with Redis\", single instance", Version: "Redis docs",
		Source:  redisDocs + "develop/clients/patterns/distributed-locks/",
		Differs: "the release script answers 1 when the key is not ours (a common port bug), on purpose"},
	"redlock": {Library: "go-redsync/redsync Mutex (validity on Go's monotonic clock: time.Now()/Until())", Version: "v4",
		Source: "https://github.com/go-redsync/redsync/blob/master/mutex.go"},
	"redisson": {Library: "Redisson RLock (RedissonLock, RenewalTask watchdog)", Version: ">= 3.44",
		Source: "https://github.com/redisson/redisson/blob/master/redisson/src/main/java/org/redisson/renewal/RenewalTask.java"},
	"redis-sentinel": {Library: "redis-lua's recipe through go-redis's Sentinel FailoverClient", Version: "go-redis v9",
		Source: "https://github.com/redis/go-redis/blob/master/sentinel.go"},
	"mysql-optimistic": {Library: "optimistic locking with a version column (compare-and-set UPDATE)", Version: "recipe",
		Source: "https://mariadb.com/kb/en/update/"},
	"mysql-for-update": {Library: "SELECT ... FOR UPDATE NOWAIT in an open transaction", Version: "MariaDB 10.3+",
		Source: "https://mariadb.com/kb/en/select/#for-update"},
	"mysql-unique": {Library: "a lock row under a UNIQUE key (INSERT to take, DELETE to give back)", Version: "recipe",
		Source: "https://mariadb.com/kb/en/insert/"},
	"mysql-unique-expiry": {Library: "a lock row under a UNIQUE key with an expiry column and a cleanup step", Version: "recipe",
		Source: "https://mariadb.com/kb/en/insert/"},
	"mysql-get-lock": {Library: "MariaDB GET_LOCK / RELEASE_LOCK", Version: "MariaDB 10.x",
		Source: "https://mariadb.com/kb/en/get_lock/"},
	"zk": {Library: "Apache Curator InterProcessMutex (LockInternals, StandardLockInternalsDriver)", Version: "5.x",
		Source: curatorLocks + "InterProcessMutex.java"},
	"zk-strict": {Library: "Apache Curator InterProcessMutex + ConnectionStateListener, tech note 10 (SUSPENDED and LOST heard through ConnectionStateManager's event thread)", Version: "5.x",
		Source: "https://cwiki.apache.org/confluence/display/CURATOR/TN10"},
	"zk-semaphore": {Library: "Apache Curator InterProcessSemaphoreMutex (InterProcessSemaphoreV2, one lease)", Version: "5.x",
		Source: curatorLocks + "InterProcessSemaphoreV2.java"},
	"zk-rw": {Library: "Apache Curator InterProcessReadWriteLock", Version: "5.x",
		Source: curatorLocks + "InterProcessReadWriteLock.java"},
	"etcd": {Library: "etcd client/v3 concurrency.Mutex (Lock re-reads its key after waiting, ErrSessionExpired)", Version: "v3.5.35",
		Source: "https://github.com/etcd-io/etcd/blob/v3.5.35/client/v3/concurrency/mutex.go"},
}

// Variants lists every historical variant a --param chooses.
var Variants = []Variant{
	{Scheme: "etcd", Key: "etcd-client", Value: "pre-11456",
		Mirror: Mirror{Library: "etcd clientv3 concurrency.Mutex before the fix of etcd #11456 (no re-read after waiting)", Version: "v3.4.3",
			Source: "https://github.com/etcd-io/etcd/blob/v3.4.3/clientv3/concurrency/mutex.go"},
		Hole: "a waiter whose lease expired while it waited is granted the lock anyway (Jepsen etcd 3.4.3)"},
	{Scheme: "redisson", Key: "redisson-watchdog", Value: "pre-3.44",
		Mirror: Mirror{Library: "Redisson RLock watchdog before RenewalTask (renewExpiration gives up on an error)", Version: "< 3.44",
			Source: "https://github.com/redisson/redisson/blob/redisson-3.43.0/redisson/src/main/java/org/redisson/RedissonBaseLock.java"},
		Hole: "one failed renewal (a lost reply, a frozen server) stops the watchdog for good: the lease runs out under a live holder"},
	{Scheme: "redlock", Key: "redlock-clock", Value: "wall",
		Mirror: Mirror{Library: "Redlock as Redis describes it, validity measured on the wall clock (node-redlock's Date.now(), Java ports' currentTimeMillis)", Version: "Redis docs",
			Source: redisDocs + "develop/clients/patterns/distributed-locks/"},
		Hole: "a wall-clock step back makes the client believe its lock valid after the servers expired it"},
	zkSequenceToken("zk"), zkSequenceToken("zk-strict"), zkSequenceToken("zk-semaphore"), zkSequenceToken("zk-rw"),
}

// zkSequenceToken is the zk family's variant that fences with the lock
// node's sequence number.
func zkSequenceToken(scheme string) Variant {
	return Variant{Scheme: scheme, Key: "zk-token", Value: "sequence",
		Mirror: Mirror{Library: "the ZooKeeper lock recipe fenced with the lock node's sequence number (a common pattern)", Version: "ZooKeeper docs",
			Source: zooRecipes},
		Hole: "the sequence number starts again from 0 once the empty CONTAINER parent was reaped and made again: tokens go back"}
}

// variantKeys are the --param keys the variants read.
func variantKeys() []string {
	var keys []string
	for _, v := range Variants {
		if !slices.Contains(keys, v.Key) {
			keys = append(keys, v.Key)
		}
	}
	return keys
}

// VariantParam reports whether key chooses a variant, and of which schemes.
func VariantParam(key string) (schemes []string, ok bool) {
	for _, v := range Variants {
		if v.Key == key && !slices.Contains(schemes, v.Scheme) {
			schemes = append(schemes, v.Scheme)
		}
	}
	return schemes, len(schemes) > 0
}

// variant returns the variant of scheme chosen in params: nil for the
// default, an error for a value no variant has.
func variant(scheme string, params map[string]string) (*Variant, error) {
	for _, key := range variantKeys() {
		val, set := params[key]
		if !set {
			continue
		}
		var vals []string
		for i, v := range Variants {
			if v.Scheme != scheme || v.Key != key {
				continue
			}
			if v.Value == val {
				return &Variants[i], nil
			}
			vals = append(vals, v.Value)
		}
		if len(vals) > 0 && val != "" && val != "default" {
			return nil, fmt.Errorf("--param %s=%s: %s has the variants %s (or default)", key, val, scheme, strings.Join(vals, ", "))
		}
	}
	return nil, nil
}

// MirrorOf returns what a run of scheme with params follows: the variant
// chosen, else the scheme's default.
func MirrorOf(scheme string, params map[string]string) (Mirror, error) {
	v, err := variant(scheme, params)
	if err != nil {
		return Mirror{}, err
	}
	if v != nil {
		m := v.Mirror
		m.Variant = v.Param()
		return m, nil
	}
	m, ok := Mirrors[scheme]
	if !ok {
		return Mirror{}, fmt.Errorf("scheme %q names no library it mirrors", scheme)
	}
	return m, nil
}

// isVariant reports whether the run's params choose the variant key=value.
func isVariant(c Config, key, value string) bool { return c.Params[key] == value }
