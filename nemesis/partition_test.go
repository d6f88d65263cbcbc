package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters/netns"
)

// Every timed shape keeps each server on the side it was drawn for: the
// clients added to one side used to overwrite the other side's servers
// (both sides were slices of one array), so a server fell out of the
// partition and a client stood on both sides.
func TestShapeSidesKeepEveryServer(t *testing.T) {
	hosts := func(prefix string, n int) []*netns.Host {
		var out []*netns.Host
		for i := 1; i <= n; i++ {
			out = append(out, &netns.Host{Name: fmt.Sprintf("%s-%d", prefix, i)})
		}
		return out
	}
	for _, shape := range []string{"isolate-server", "split", "bridge"} {
		for _, ns := range []int{3, 5, 6} {
			for seed := uint64(0); seed < 20; seed++ {
				servers, clients := hosts("server", ns), hosts("client", 5)
				a, b := shapeSides(rand.New(rand.NewPCG(seed, 1)), shape, servers, clients)
				count := map[string]int{}
				for _, h := range append(append([]*netns.Host{}, a...), b...) {
					count[h.Name]++
				}
				for _, c := range clients {
					require.Equal(t, 1, count[c.Name], "%s, %d servers, seed %d: client %s on %d sides", shape, ns, seed, c.Name, count[c.Name])
				}
				want := ns
				if shape == "bridge" {
					want = ns - 1 // the bridge node is on neither list: it is cut from nobody
				}
				got := 0
				for _, s := range servers {
					require.LessOrEqual(t, count[s.Name], 1, "%s: server %s on both sides", shape, s.Name)
					got += count[s.Name]
				}
				require.Equal(t, want, got, "%s, %d servers, seed %d: servers lost from the sides", shape, ns, seed)
			}
		}
	}
}

// On a topology whose servers play different parts (Sentinel: data nodes
// and Sentinels), split and bridge cut each group on its own, so that both
// sides get members of every group, and holder-minority takes a minority
// of each.
func TestGroupedSides(t *testing.T) {
	hosts := func(prefix string, n int) []*netns.Host {
		var out []*netns.Host
		for i := 1; i <= n; i++ {
			out = append(out, &netns.Host{Name: fmt.Sprintf("%s-%d", prefix, i)})
		}
		return out
	}
	group := func(hs []*netns.Host) map[string]int {
		out := map[string]int{}
		for _, h := range hs {
			kind, _, _ := strings.Cut(h.Name, "-")
			out[kind]++
		}
		return out
	}
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		groups := [][]*netns.Host{hosts("redis", 3), hosts("sentinel", 3)}
		clients := hosts("client", 5)

		a, b := groupedSides(r, "split", groups, clients)
		require.Equal(t, 1, group(a)["redis"], "seed %d", seed)
		require.Equal(t, 1, group(a)["sentinel"], "seed %d", seed)
		require.Equal(t, 2, group(b)["redis"], "seed %d", seed)
		require.Equal(t, 2, group(b)["sentinel"], "seed %d: the majority side has the Sentinels' quorum", seed)
		require.Equal(t, 5, group(a)["client"]+group(b)["client"])

		a, b = groupedSides(r, "bridge", groups, clients)
		for _, side := range []map[string]int{group(a), group(b)} {
			require.Equal(t, 1, side["redis"], "seed %d", seed)
			require.Equal(t, 1, side["sentinel"], "seed %d", seed)
		}
		require.Equal(t, 5, group(a)["client"]+group(b)["client"])

		a, b = groupedSides(r, "isolate-server", groups, clients)
		require.Len(t, a, 1)
		require.Len(t, b, 5+5)

		m := group(minority(r, groups))
		require.Equal(t, map[string]int{"redis": 1, "sentinel": 1}, m, "seed %d", seed)
	}
}

type fixedMaster string

func (m fixedMaster) MasterAddr(context.Context) (string, error) { return string(m), nil }

// The aimed split puts the master on the minority side with one Sentinel,
// the quorum on the other, and clients on both sides, whatever the seed drew.
func TestMasterMinority(t *testing.T) {
	var groups [][]*netns.Host
	addrs := map[*netns.Host]string{}
	for _, kind := range []string{"redis", "sentinel"} {
		var g []*netns.Host
		for i := 1; i <= 3; i++ {
			h := &netns.Host{Name: fmt.Sprintf("%s-%d", kind, i)}
			addrs[h] = fmt.Sprintf("10.0.0.%d:%s", i, kind)
			g = append(g, h)
		}
		groups = append(groups, g)
	}
	var clients []*netns.Host
	for i := 1; i <= 2; i++ {
		clients = append(clients, &netns.Host{Name: fmt.Sprintf("client-%d", i)})
	}
	count := func(hs []*netns.Host, prefix string) int {
		n := 0
		for _, h := range hs {
			if strings.HasPrefix(h.Name, prefix) {
				n++
			}
		}
		return n
	}
	for seed := uint64(0); seed < 30; seed++ {
		for m := 1; m <= 3; m++ {
			r := rand.New(rand.NewPCG(seed, 1))
			a, b := groupedSides(r, "split", groups, clients)
			a, b = masterMinority(context.Background(), fixedMaster(fmt.Sprintf("10.0.0.%d:redis", m)), groups, addrs, a, b)
			require.Equal(t, fmt.Sprintf("redis-%d", m), a[slices.IndexFunc(a, func(h *netns.Host) bool { return strings.HasPrefix(h.Name, "redis") })].Name, "seed %d: the master on the minority side", seed)
			require.Equal(t, 1, count(a, "redis"), "seed %d", seed)
			require.Equal(t, 1, count(a, "sentinel"), "seed %d", seed)
			require.Equal(t, 2, count(b, "sentinel"), "seed %d: the quorum on the majority side", seed)
			require.Equal(t, 1, count(a, "client"), "seed %d: clients on both sides", seed)
			require.Equal(t, 1, count(b, "client"), "seed %d", seed)
		}
	}
}

// A timed shape waits a moment for the partition slot (a lost-reply that
// stands down holds it for the time its rules take), gives up when it
// stays taken (a partition in place) and at once when the run is ending.
func TestPartitionClaimWithin(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	p := &partitioner{ctx: ctx, stop: stop}
	require.True(t, p.claim())
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.done()
	}()
	t0 := time.Now()
	require.True(t, p.claimWithin(5*time.Second), "the slot was freed after 100 ms")
	require.GreaterOrEqual(t, time.Since(t0), 100*time.Millisecond)

	// Still ours: another claim waits its 200 ms and gives up.
	t0 = time.Now()
	require.False(t, p.claimWithin(200*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(t0), 200*time.Millisecond)
	p.done()

	// The run is ending: no claim, no wait.
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	t0 = time.Now()
	require.False(t, p.claimWithin(5*time.Second))
	require.Less(t, time.Since(t0), time.Second)
}
