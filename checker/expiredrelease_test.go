package checker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestReleaseOKOnExpired(t *testing.T) {
	const slack = int64(5e6)
	tests := []struct {
		name    string
		lease   bool
		call    float64 // release call; the acquire returned at 10 ms, TTL 100 ms
		typ     history.Type
		removed string
		want    int
		explain string
	}{
		{name: "no lease: skipped", call: 500, typ: history.OK, removed: "-"},
		{name: "in time, removed", lease: true, call: 50, typ: history.OK, removed: "a"},
		{name: "in time, not reported", lease: true, call: 50, typ: history.OK},
		{name: "late within slack, not reported", lease: true, call: 114, typ: history.OK},
		{name: "removed nothing", lease: true, call: 50, typ: history.OK, removed: "-", want: 1,
			explain: "yet the server removed nothing"},
		{name: "late, not reported", lease: true, call: 116, typ: history.OK, want: 1,
			explain: "had expired by 110.0 ms at the latest, 6.0 ms before the release"},
		{name: "late but failed", lease: true, call: 300, typ: history.Fail, removed: "-"},
		{name: "renewed: late, not reported, is fine", lease: true, call: 5000, typ: history.OK},
		{name: "renewed: the server's own account still counts", lease: true, call: 50, typ: history.OK, removed: "-", want: 1,
			explain: "yet the server removed nothing"},
		{name: "late and foreign", lease: true, call: 300, typ: history.OK, removed: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.Lease, b.info.TTLMillis = tt.lease, 100
			b.info.Renews = strings.HasPrefix(tt.name, "renewed")
			b.acq(1, 5, 10, "a")
			b.o(1, history.Release, tt.call, tt.call+1, tt.typ, func(i, d *history.Event) {
				i.Owner, d.Removed = "a", tt.removed
				if tt.typ == history.Fail {
					d.Reason = history.ReasonNotOwner
				}
			})
			h := b.build(t)
			p, as := checkReleaseOKOnExpired(newFacts(h), slack)
			if !tt.lease {
				require.Equal(t, Skipped, p.Status)
				require.Empty(t, as)
				return
			}
			require.Len(t, as, tt.want)
			require.Equal(t, tt.want, p.Count)
			if tt.want == 0 {
				require.Equal(t, Pass, p.Status)
				return
			}
			require.Equal(t, Fail, p.Status)
			require.Equal(t, KindReleaseOKOnExpired, as[0].Kind)
			require.Equal(t, []int{1}, as[0].Clients)
			require.Contains(t, as[0].Explanation, tt.explain)
		})
	}
}
