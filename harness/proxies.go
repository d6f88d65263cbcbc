package harness

import (
	"context"
	"fmt"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/nemesis"
)

// makeProxies puts a proxy on every client-server link when the run's
// faults need them (nemesis.Needs.Proxies): only those runs go through
// proxies, every other keeps its timing. The proxies belong to the run, not
// to the cluster (they live in the clients' namespaces), so a pooled
// cluster serves runs with and without them alike. nil without.
func (r *run) makeProxies() *proxy.Set {
	if !nemesis.NeedsProxies(r.plan.Nemeses) || r.network == nil {
		return nil
	}
	var servers []proxy.Server
	for _, n := range r.cl.Nodes() {
		servers = append(servers, proxy.Server{Name: n.Name(), Addr: n.Addr()})
	}
	links := proxy.New(servers, r.o.Seed)
	r.defer_(links.Close) // before the cluster's Stop (and the namespaces) go
	return links
}

// proxiedHost gives each client its own namespace, with a proxy on each of
// its links when links is not nil: a proxy that cannot be put in place
// keeps the client from starting (a harness error).
func proxiedHost(n *netns.Net, links *proxy.Set) func(int) (*netns.Host, error) {
	add := clientHost(n)
	if add == nil || links == nil {
		return add
	}
	return func(id int) (*netns.Host, error) {
		h, err := add(id)
		if err != nil {
			return nil, err
		}
		if err := links.AddClient(context.Background(), h); err != nil {
			return nil, fmt.Errorf("client %d: %w", id, err)
		}
		return h, nil
	}
}
