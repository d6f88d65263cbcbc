package docker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
)

// userStack starts what a user's compose stack of topology redis5 looks
// like to the compose backend (labelled containers on a network, with
// aliases, no fixed addresses), on a network with a subnet of its own (subnet
// true) or one the engine picks. Everything carries the test's run id and
// is removed when the test ends.
func userStack(t *testing.T, cli *client.Client, id string, subnet bool) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		_, err := docker.Cleanup(context.Background(), id)
		require.NoError(t, err)
		c, n, err := docker.Leftovers(context.Background(), id)
		require.NoError(t, err)
		require.Zero(t, c+n, "containers or networks left")
	})
	opts := network.CreateOptions{Labels: map[string]string{docker.LabelRun: id}}
	var err error
	for i := 0; i < 20; i++ {
		if subnet {
			third := 100 + (os.Getpid()+i*7)%150
			opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: fmt.Sprintf("172.16.%d.0/24", third)}}}
		}
		if _, err = cli.NetworkCreate(ctx, id, opts); err == nil {
			break
		}
	}
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		node := fmt.Sprintf("redis-%d", i)
		resp, err := cli.ContainerCreate(ctx, &container.Config{
			Image: testImage(docker.KindRedis),
			Cmd:   []string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"},
			Labels: map[string]string{docker.LabelRun: id, docker.LabelTopology: "redis5", docker.LabelNode: node,
				"com.docker.compose.project": id},
		}, &container.HostConfig{}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			id: {Aliases: []string{"redlock-" + node[len("redis-"):]}},
		}}, nil, id+"-"+node)
		require.NoError(t, err)
		// One after another: redis-1 has the lowest address.
		require.NoError(t, cli.ContainerStart(ctx, resp.ID, container.StartOptions{}))
	}
}

// A killed compose server comes back at the address its clients use: on a
// network with a subnet of the user's, the container is reconnected with
// it (its aliases kept) even when the stack gave it no fixed address and
// another container took the lowest free address meanwhile; on a network
// whose addresses the engine hands out, where it cannot be kept, the
// restart fails with one line that says why and what to do.
func TestComposeRestartKeepsAddress(t *testing.T) {
	needDocker(t)
	cli, err := docker.Connect(context.Background())
	require.NoError(t, err)
	defer cli.Close()
	for _, subnet := range []bool{true, false} {
		t.Run(fmt.Sprintf("subnet=%v", subnet), func(t *testing.T) {
			id := runID()
			userStack(t, cli, id, subnet)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := docker.Compose{Project: id}.Start(ctx, clusters.Spec{Topology: "redis5", RunID: id, Dir: t.TempDir()})
			require.NoError(t, err)
			defer func() { require.NoError(t, cl.Stop(context.Background())) }()
			// Two servers killed at once, the second restarted first: the
			// engine would give it the first one's (lower) address.
			n1, n2 := cl.Nodes()[0], cl.Nodes()[1]
			addr1, addr2 := n1.Addr(), n2.Addr()
			require.NoError(t, n1.Kill())
			require.NoError(t, n2.Kill())
			err = n2.Restart(ctx)
			if !subnet {
				host, _, _ := net.SplitHostPort(addr2)
				require.ErrorContains(t, err, "redis-2 came back at ")
				require.ErrorContains(t, err, "instead of "+host+",")
				require.ErrorContains(t, err, "give it a subnet and every service an ipv4_address")
				require.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			require.NoError(t, n1.Restart(ctx))
			for i, addr := range []string{addr1, addr2} {
				require.Equal(t, "+PONG", do(t, dial(t, addr), "PING"))
				info, err := cli.ContainerInspect(ctx, fmt.Sprintf("%s-redis-%d", id, i+1))
				require.NoError(t, err)
				es := info.NetworkSettings.Networks[id]
				require.NotNil(t, es)
				require.Equal(t, addr, es.IPAddress+":6379")
				require.Contains(t, es.Aliases, fmt.Sprintf("redlock-%d", i+1), "the compose service's name resolves again")
			}
		})
	}
}
