package checker_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/nemesis"
)

// The checker's list of link faults is the nemesis registry's: a new
// network-speed fault the checker did not know would leave a session
// expired by it blamed on the lock service.
func TestLinkFaultsAgreeWithTheRegistry(t *testing.T) {
	var faults []string
	for _, i := range nemesis.NetSpeedFaults {
		if i.Name != nemesis.FaultProxied && i.Name != nemesis.FaultSlowNode {
			faults = append(faults, i.Name)
		}
	}
	require.ElementsMatch(t, faults, checker.LinkFaults)
	require.Equal(t, nemesis.FaultSlowNode, checker.SlowNodeFault)
	for _, f := range checker.ConnectionCuttingFaults {
		require.True(t, slices.Contains(checker.LinkFaults, f), f)
	}
}
