package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestForeignRelease(t *testing.T) {
	tests := []struct {
		name    string
		removed string
		typ     history.Type
		clients []int
		explain string
	}{
		{name: "own key", removed: "c1", typ: history.OK},
		{name: "nothing removed", removed: "-", typ: history.OK},
		{name: "not reported", removed: "", typ: history.OK},
		{name: "failed release", removed: "c2", typ: history.Fail},
		{name: "another client's key", removed: "c2", typ: history.OK, clients: []int{1, 2},
			explain: "the server deleted the key of client 2 (owner c2), which had acquired the lock at 20.0 ms, instead of its own (owner c1)"},
		{name: "an unknown owner's key", removed: "zz", typ: history.OK, clients: []int{1},
			explain: "owner zz, which no successful acquire in the history carries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.acq(1, 0, 1, "c1")
			b.acq(2, 19, 20, "c2")
			b.o(1, history.Release, 30, 31, tt.typ, func(i, d *history.Event) {
				i.Owner, d.Removed = "c1", tt.removed
			})
			p, as := checkForeignRelease(newFacts(b.build(t)))
			require.Equal(t, len(as), p.Count)
			if tt.clients == nil {
				require.Empty(t, as)
				require.Equal(t, Pass, p.Status)
				return
			}
			require.Len(t, as, 1)
			require.Equal(t, Fail, p.Status)
			require.Equal(t, tt.clients, as[0].Clients)
			require.Equal(t, ms(30), as[0].Start)
			require.Contains(t, as[0].Explanation, tt.explain)
		})
	}
}
