package locks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The decisions of Curator's InterProcessSemaphoreV2.internalAcquire1Lease
// (curator-recipes, org.apache.curator.framework.recipes.locks), step by
// step: after creating its EPHEMERAL_SEQUENTIAL lease node it lists
// leases/ and
//   - if (!children.contains(nodeName)) { log.error("Sequential path not
//     found: " + path); return InternalAcquireResult.RETRY_DUE_TO_MISSING_NODE; }
//   - if (children.size() <= maxLeases) break; (the lease is ours)
//   - else wait for a change, or deleteOurPath and return RETURN_NULL.
//
// The missing-node check comes first: an empty listing (our node gone with
// an expired session) is a retry, never a grant.
func TestSemaphoreStepFollowsCurator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kids []string
		ours string
		want semStep
	}{
		{"alone", []string{"_c_1-lease-0000000003"}, "_c_1-lease-0000000003", semGranted},
		{"our node gone, nobody else (session expired)", nil, "_c_1-lease-0000000003", semMissing},
		{"our node gone, another's there", []string{"_c_2-lease-0000000004"}, "_c_1-lease-0000000003", semMissing},
		{"another holds", []string{"_c_2-lease-0000000002", "_c_1-lease-0000000003"}, "_c_1-lease-0000000003", semFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, semaphoreStep(tt.kids, tt.ours, 1))
		})
	}
}
