package docker

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCandidates(t *testing.T) {
	all := candidates("lt0233523520")
	require.Len(t, all, 256)
	pool := netip.MustParsePrefix("172.28.0.0/14")
	seen := map[netip.Prefix]bool{}
	for _, p := range all {
		require.Equal(t, 22, p.Bits())
		require.Equal(t, p, p.Masked(), "%s is not aligned", p)
		require.True(t, pool.Contains(p.Addr()), "%s is outside %s", p, pool)
		require.False(t, seen[p], "%s twice", p)
		seen[p] = true
	}
	require.NotEqual(t, all[0], candidates("lt0233523521")[0], "two runs start at the same place")
	require.True(t, overlapsAny(netip.MustParsePrefix("172.28.4.0/22"), []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}))
}

func TestClientIP(t *testing.T) {
	cases := []struct {
		prefix string
		i      int
		want   string
	}{
		{"172.28.4.0/22", 1, "172.28.7.254"},
		{"172.28.4.0/22", 2, "172.28.7.253"},
		{"172.28.4.0/22", 300, "172.28.6.211"},
		{"172.18.0.0/16", 1, "172.18.255.254"},
	}
	for _, tc := range cases {
		got, err := clientIP(netip.MustParsePrefix(tc.prefix), tc.i)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%s #%d", tc.prefix, tc.i)
	}
	_, err := clientIP(netip.MustParsePrefix("172.28.4.0/22"), 511)
	require.Error(t, err)
}

func TestBridgeName(t *testing.T) {
	a, b := bridgeName("lt0432295ba104"), bridgeName("lt0432295ba105")
	require.NotEqual(t, a, b, "runs a process starts within one second")
	require.Len(t, a, 15)
	require.Regexp(t, `^br-lt[0-9a-f]{10}$`, a)
}

// A missing image is explained by who chose it: the local image is built,
// the default official one can be replaced by the local one, and an image
// the user named is theirs to check (no build script, as if the default
// were missing).
func TestMissingImage(t *testing.T) {
	t.Setenv(ImageEnv(KindRedis), "")
	pull := errors.New("Error response from daemon: pull access denied\nmore")
	err := missingImage(KindRedis, map[string]string{KindRedis: "nosuch/image:1"}, pull)
	require.EqualError(t, err, "image nosuch/image:1, given with --image redis, is not here and could not be pulled (Error response from daemon: pull access denied): check the name, or pull or load it into the engine (without --image redis the default is redis:7)")
	require.NotContains(t, err.Error(), "build-images")

	t.Setenv(ImageEnv(KindEtcd), "my/etcd:3")
	err = missingImage(KindEtcd, nil, nil)
	require.EqualError(t, err, "image my/etcd:3, given with LOCKTEST_IMAGE_ETCD, is not here: check the name, or pull or load it into the engine (without LOCKTEST_IMAGE_ETCD the default is quay.io/coreos/etcd:v3.5.17)")

	err = missingImage(KindZooKeeper, map[string]string{KindZooKeeper: LocalImage(KindZooKeeper)}, nil)
	require.EqualError(t, err, "image locktest/zookeeper:bookworm is not here: build it with `sudo ./scripts/build-images.sh zookeeper`")

	t.Setenv(ImageEnv(KindMariaDB), "")
	err = missingImage(KindMariaDB, nil, pull)
	require.ErrorContains(t, err, "image mariadb:10.11 is not here and could not be pulled (Error response from daemon: pull access denied): build a local one with `sudo ./scripts/build-images.sh mariadb` and run with LOCKTEST_IMAGE_MARIADB=locktest/mariadb:bookworm")
}
