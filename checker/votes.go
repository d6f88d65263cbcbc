package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// missingVotes counts the grants that name the servers that granted them
// (history.Operation.Nodes: Redlock's) and lack some server that granted
// another one, and how often each such server was missing. A history
// whose grants name no servers has none.
func missingVotes(h *history.History) (short int, missing map[string]int) {
	var all []string
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Op == history.Acquire && op.Type == history.OK {
			for _, n := range op.Nodes {
				if !slices.Contains(all, n) {
					all = append(all, n)
				}
			}
		}
	}
	if len(all) < 2 {
		return 0, nil
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Op != history.Acquire || op.Type != history.OK || len(op.Nodes) == 0 || len(op.Nodes) == len(all) {
			continue
		}
		short++
		if missing == nil {
			missing = map[string]int{}
		}
		for _, n := range all {
			if !slices.Contains(op.Nodes, n) {
				missing[n]++
			}
		}
	}
	return short, missing
}
