package locks_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/locks"
)

// Every scheme names the library or recipe it writes out, with a version
// and a link to the source it follows; every variant names a scheme that
// exists and differs from its default.
func TestEverySchemeMirrorsSomething(t *testing.T) {
	t.Parallel()
	for _, s := range locks.Schemes {
		t.Run(s.Name, func(t *testing.T) {
			m, err := locks.MirrorOf(s.Name, nil)
			require.NoError(t, err, "scheme %s names no library it mirrors: add it to locks.Mirrors", s.Name)
			require.NotEmpty(t, m.Library)
			require.NotEmpty(t, m.Version)
			require.True(t, strings.HasPrefix(m.Source, "https://"), "source %q is not a link", m.Source)
			require.Empty(t, m.Variant, "the default is no variant")
		})
	}
	require.Len(t, locks.Mirrors, len(locks.Schemes), "a mirror for a scheme that does not exist")
	for _, v := range locks.Variants {
		t.Run(v.Param(), func(t *testing.T) {
			_, ok := locks.Lookup(v.Scheme)
			require.True(t, ok, "variant of unknown scheme %s", v.Scheme)
			require.NotEmpty(t, v.Hole)
			require.True(t, strings.HasPrefix(v.Mirror.Source, "https://"))
			m, err := locks.MirrorOf(v.Scheme, map[string]string{v.Key: v.Value})
			require.NoError(t, err)
			require.Equal(t, v.Param(), m.Variant)
			require.NotEqual(t, locks.Mirrors[v.Scheme].Source, m.Source, "a variant follows other code than the default")
		})
	}
}

func TestMirrorOfRefusesUnknownVariant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, scheme string
		params       map[string]string
		want         string // "" when no error
	}{
		{"default", "etcd", nil, ""},
		{"named default", "etcd", map[string]string{"etcd-client": "default"}, ""},
		{"variant", "etcd", map[string]string{"etcd-client": "pre-11456"}, ""},
		{"typo", "etcd", map[string]string{"etcd-client": "pre-1145"}, "etcd has the variants pre-11456"},
		{"other scheme's key", "zk", map[string]string{"etcd-client": "pre-11456"}, ""},
		{"redlock wall", "redlock", map[string]string{"redlock-clock": "wall"}, ""},
		{"redlock typo", "redlock", map[string]string{"redlock-clock": "walll"}, "redlock has the variants wall"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := locks.MirrorOf(tt.scheme, tt.params)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
