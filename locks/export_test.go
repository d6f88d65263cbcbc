package locks

// Redisson's scripts as locktest writes them, for the differential test in
// package locks_test (redisson_scripts_test.go).
var (
	RedissonAcquireScript = redissonAcquire
	RedissonReleaseScript = redissonRelease
	RedissonRenewScript   = redissonRenew
)
