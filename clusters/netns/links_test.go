package netns

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Cleanup deletes a crashed run's links by name: exactly its own.
func TestIsLink(t *testing.T) {
	for _, tc := range []struct {
		id, name string
		want     bool
	}{
		{"lt12ab", "lt12abc1", true},
		{"lt12ab", "lt12abc510", true},
		{"lt12ab", "lt12abc", false},    // no index
		{"lt12ab", "lt12abc1c1", false}, // run lt12abc1's
		{"lt12abc1", "lt12abc1c1", true},
		{"lt12abc1", "lt12abc1", false},
		{"lt12", "lt12abc1", false},    // another run's (lt12ab)
		{"lt12ab", "lt12ab-c1", false}, // a namespace's name, not a link
		{"lt12ab", "eth0", false},
		{"lt12ab", "br-lt12abc1", false},
		{"", "c1", false},
	} {
		require.Equal(t, tc.want, isLink(tc.id, tc.name), "%s %s", tc.id, tc.name)
	}
}

// A name that does not fit in an interface name is refused, never cut (a
// cut name would not start with the run's id).
func TestVethName(t *testing.T) {
	v, err := vethName("lt123456789", 510) // the longest of the harness's ids, the last client of a /22
	require.NoError(t, err)
	require.Equal(t, "lt123456789c510", v)
	_, err = vethName("lt1234567890", 510)
	require.ErrorContains(t, err, "longer than 15")
}
