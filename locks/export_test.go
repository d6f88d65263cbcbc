package locks

// Redisson's scripts as locktest writes them, for the differential test in
// package locks_test (redisson_scripts_test.go).
var (
	RedissonAcquireScript = redissonAcquire
	RedissonReleaseScript = redissonRelease
	RedissonRenewScript   = redissonRenew
)

// SetBeforeEnsureLevel sets the hook zk's ensure calls before it makes
// each level of a lock's path; nil removes it.
func SetBeforeEnsureLevel(f func(path string)) {
	if f == nil {
		beforeEnsureLevel.Store(nil)
		return
	}
	beforeEnsureLevel.Store(&f)
}
