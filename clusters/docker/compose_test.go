package docker

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/require"
)

// ct is a container of compose project project, on network nw at ip.
func summary(project, node, state, nw, ip string) container.Summary {
	return container.Summary{
		ID:     project + "-" + node,
		Names:  []string{"/" + project + "_" + node + "_1"},
		Image:  "locktest/redis:bookworm",
		State:  state,
		Labels: map[string]string{LabelTopology: "redis5", LabelNode: node, "com.docker.compose.project": project},
		NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{
			nw: {IPAddress: ip},
		}},
	}
}

func stack(project, nw, prefix string) []container.Summary {
	var out []container.Summary
	for i, n := range []string{"redis-1", "redis-2", "redis-3", "redis-4", "redis-5"} {
		out = append(out, summary(project, n, "running", nw, prefix+string(rune('1'+i))))
	}
	return out
}

func testUp(project, profile string) string {
	return "docker-compose -p " + project + " --profile " + profile + " up -d"
}

func TestSelectCompose(t *testing.T) {
	redis5, _ := Lookup("redis5")
	cases := []struct {
		name    string
		list    []container.Summary
		project string
		want    string // error; "" for none
	}{
		{"one stack", stack("a", "a_default", "172.16.77.1"), "", ""},
		// Two stacks of one topology: the user is told how to pick one,
		// not that the containers are on several networks (they are), nor
		// that one of them is stopped.
		{"two stacks", append(stack("a", "a_default", "172.16.77.1"), append(stack("b", "b_default", "172.16.78.1"),
			summary("b", "redis-6", "exited", "b_default", "172.16.78.9"))...), "",
			"2 compose projects run topology redis5 (a, b); pick one with LOCKTEST_COMPOSE_PROJECT=NAME"},
		{"a stopped server", append(stack("a", "a_default", "172.16.77.1")[:4], summary("a", "redis-5", "exited", "a_default", "")), "",
			"container a_redis-5_1 (redis-5) is exited; bring the stack up with `docker-compose -p a --profile redlock up -d`"},
		{"servers missing", stack("a", "a_default", "172.16.77.1")[:3], "a",
			"found 3 containers labelled locktest.topology=redis5, want 5; start them with `docker-compose -p a --profile redlock up -d`"},
		{"two networks", append(stack("a", "a_default", "172.16.77.1")[:4], summary("a", "redis-5", "running", "a_other", "172.16.79.5")), "",
			"the redis5 containers are on several networks (a_default, a_other)"},
		{"an unknown server name", append(stack("a", "a_default", "172.16.77.1")[:4], summary("a", "memcached-1", "running", "a_default", "172.16.77.15")), "",
			"has locktest.node=memcached-1, which is no server name locktest knows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectCompose(tc.list, redis5, tc.project, testUp)
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				require.NotContains(t, err.Error(), "<profile>")
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 5)
			for _, c := range got {
				require.Equal(t, "a_default", c.network)
				require.Equal(t, roleRedis, c.role)
				require.True(t, strings.HasPrefix(c.ip, "172.16.77."))
			}
		})
	}
}

// The hint names the compose this machine has, with the profile filled in.
func TestComposeUp(t *testing.T) {
	cmd, v2 := ComposeCommand()
	got := composeUp("p1", "redlock")
	require.True(t, strings.HasPrefix(got, cmd+" -p p1 --profile redlock up -d"), got)
	require.Equal(t, v2, strings.HasSuffix(got, " --wait"), got)
	require.NotContains(t, composeUp("", "zk3"), " -p ")
}
