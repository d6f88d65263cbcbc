package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// Ports the servers listen on inside their containers (each has its own
// address, so every one has the server's usual port).
const (
	portRedis    = 6379
	portSentinel = 26379
	portZK       = 2181
	portZKPeer   = 2888
	portZKElect  = 3888
	portEtcd     = 2379
	portEtcdPeer = 2380
	portMySQL    = 3306
)

// newNode is a node of the cluster with its fixed address: server i
// (1-based) of the topology.
func (c *cluster) newNode(s clusters.Spec, i int, name, role, kind string, port int) *node {
	n := &node{c: c, name: name, role: role, kind: kind, dir: filepath.Join(s.Dir, "servers", name), ip: c.serverIP(i), port: port}
	c.nodes = append(c.nodes, n)
	return n
}

// plan lays out the topology's containers: names, roles, addresses,
// commands and the files written into them before they start.
func (c *cluster) plan(s clusters.Spec) error {
	t, _ := Lookup(s.Topology)
	switch s.Topology {
	case "redis", "redis5":
		for i := 1; i <= t.Nodes; i++ {
			n := c.newNode(s, i, fmt.Sprintf("redis-%d", i), roleRedis, KindRedis, portRedis)
			n.cmd = redisCmd(nil)
		}
	case "redis-sentinel":
		master := c.serverIP(1) + ":" + strconv.Itoa(portRedis)
		for i := 1; i <= 3; i++ {
			n := c.newNode(s, i, fmt.Sprintf("redis-%d", i), roleRedis, KindRedis, portRedis)
			m := master
			if i == 1 {
				m = ""
			}
			conf, err := recipe.RedisDataConf(m)
			if err != nil {
				return err
			}
			// In /data, the working directory of both images: the
			// official image's entrypoint gives it to the redis user,
			// and the server rewrites the file after a failover.
			n.files = map[string]string{"/data/redis.conf": conf}
			n.cmd = redisCmd([]string{"/data/redis.conf"})
		}
		conf, err := recipe.SentinelConf(master)
		if err != nil {
			return err
		}
		for i := 1; i <= 3; i++ {
			n := c.newNode(s, 3+i, fmt.Sprintf("sentinel-%d", i), roleSentinel, KindRedis, portSentinel)
			n.wave = 1
			n.files = map[string]string{"/data/sentinel.conf": conf}
			n.cmd = []string{"redis-server", "/data/sentinel.conf", "--sentinel", "--bind", "0.0.0.0", "--port", strconv.Itoa(portSentinel),
				"--protected-mode", "no", "--loglevel", "notice"}
		}
	case "zk3":
		var peers []recipe.ZKPeer
		for i := 1; i <= t.Nodes; i++ {
			peers = append(peers, recipe.ZKPeer{IP: c.serverIP(i), PeerPort: portZKPeer, ElectPort: portZKElect})
		}
		for i := 1; i <= t.Nodes; i++ {
			n := c.newNode(s, i, fmt.Sprintf("zk-%d", i), roleZK, KindZooKeeper, portZK)
			n.files = map[string]string{
				"/conf/zoo.cfg":          recipe.ZKConfig("/data", portZK, "0.0.0.0", peers),
				"/conf/log4j.properties": recipe.ZKLog4jConsole,
				"/data/myid":             fmt.Sprintf("%d\n", i),
			}
			n.cmd = zkCmd()
		}
	case "etcd3":
		var initial []string
		for i := 1; i <= t.Nodes; i++ {
			initial = append(initial, fmt.Sprintf("etcd-%d=http://%s:%d", i, c.serverIP(i), portEtcdPeer))
		}
		for i := 1; i <= t.Nodes; i++ {
			n := c.newNode(s, i, fmt.Sprintf("etcd-%d", i), roleEtcd, KindEtcd, portEtcd)
			n.cmd = recipe.EtcdArgs(n.name, "/etcd-data", fmt.Sprintf("0.0.0.0:%d", portEtcd), n.Addr(),
				fmt.Sprintf("0.0.0.0:%d", portEtcdPeer), fmt.Sprintf("%s:%d", n.ip, portEtcdPeer), strings.Join(initial, ","))
		}
	case "mysql", "mysql-replicated":
		set, err := recipe.MySQLSettingsFrom(s.Params)
		if err != nil {
			return err
		}
		for i := 1; i <= t.Nodes; i++ {
			n := c.newNode(s, i, fmt.Sprintf("mysql-%d", i), roleMySQL, KindMariaDB, portMySQL)
			role := "primary"
			if i > 1 {
				role = "replica"
			}
			n.files = map[string]string{"/etc/locktest/init.sql": mysqlInitSQL(), mysqlRoleFile: role + "\n"}
			n.cmd = mysqlCmd(set, i)
			n.mysql = newMySQLAdmin(n.Addr())
		}
	default:
		return fmt.Errorf("docker backend: topology %q is not supported", s.Topology)
	}
	return nil
}

// redisCmd runs redis-server with no persistence, listening on every
// address of the container, after the config file conf if given.
func redisCmd(conf []string) []string {
	return append(append([]string{"redis-server"}, conf...), "--bind", "0.0.0.0", "--port", strconv.Itoa(portRedis),
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "notice")
}

// zkCmd runs a member on /conf/zoo.cfg with the jars of Debian's
// libzookeeper-java (the local image), or those of the official image's
// /apache-zookeeper-*-bin/lib when they are not there. Containers come up
// one after another (the engine serialises much of the work), and the
// election's retry interval, doubling from 200 ms, would reach several
// seconds before the last member is up: it is capped at 1 s.
func zkCmd() []string {
	script := `cp=/conf
for j in /usr/share/java/zookeeper.jar /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do [ -f "$j" ] && cp="$cp:$j"; done
for d in /apache-zookeeper-*-bin/lib; do [ -d "$d" ] && cp="$cp:$d/*"; done
exec java -cp "$cp" ` + strings.Join(recipe.ZKJVMFlags, " ") + ` -Dzookeeper.fastleader.maxNotificationInterval=1000 -Dzookeeper.log.dir=/tmp -Dlog4j.configuration=file:/conf/log4j.properties ` + recipe.ZKMain + ` /conf/zoo.cfg`
	return []string{"sh", "-c", script}
}

// beforeWave runs before the second wave of containers starts: the
// Sentinels start once both replicas replicate from the master (a Sentinel
// learns the replicas from the master's INFO, which it reads only every
// 10 s).
func (c *cluster) beforeWave(ctx context.Context) error {
	if c.topology != "redis-sentinel" {
		return nil
	}
	master := c.nodes[0].Addr()
	rdb := recipe.AdminClient(master)
	defer rdb.Close()
	deadline := time.Now().Add(recipe.SentinelReadyLimit)
	for {
		reps, err := recipe.OnlineReplicas(ctx, rdb)
		if err == nil && len(reps) == 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-sentinel: the replicas of %s are not online after %s (%d online, %v)", master, recipe.SentinelReadyLimit, len(reps), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// form waits until the started servers form their topology, reads their
// versions and returns the cluster as the topology's own type (a Leader,
// a Failoverer).
func (c *cluster) form(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	var out clusters.Cluster = c
	switch s.Topology {
	case "zk3":
		z := &zkCluster{c}
		if _, err := z.Leader(ctx); err != nil {
			return nil, err
		}
		out = z
	case "etcd3":
		e := &etcdCluster{c}
		if _, err := e.Leader(ctx); err != nil {
			return nil, err
		}
		out = e
	case "redis-sentinel":
		sc := &sentinelCluster{cluster: c, Sentinel: &recipe.Sentinel{AnyMaster: !c.owned}}
		for _, n := range c.nodes {
			if n.role == roleSentinel {
				sc.Sentinel.Sentinels = append(sc.Sentinel.Sentinels, n)
			} else {
				sc.Sentinel.Data = append(sc.Sentinel.Data, n)
			}
		}
		if len(sc.Sentinel.Data) != 3 || len(sc.Sentinel.Sentinels) != 3 {
			return nil, fmt.Errorf("redis-sentinel: %d data nodes and %d sentinels, want 3 and 3", len(sc.Sentinel.Data), len(sc.Sentinel.Sentinels))
		}
		if err := sc.WaitReady(ctx, recipe.SentinelReadyLimit); err != nil {
			return nil, err
		}
		out = sc
	case "mysql-replicated":
		set, err := recipe.MySQLSettingsFrom(s.Params)
		if err != nil {
			return nil, err
		}
		r := &mysqlReplicated{cluster: c, set: set}
		if err := r.setUp(ctx); err != nil {
			return nil, err
		}
		out = r
	}
	c.readVersions(ctx)
	return out, nil
}

// zkCluster is a ZooKeeper ensemble on docker.
type zkCluster struct{ *cluster }

var _ clusters.Leader = (*zkCluster)(nil)

// Leader returns the member that says it leads, asking every running one.
func (z *zkCluster) Leader(ctx context.Context) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	i, err := recipe.ZKLeader(ctx, func() []recipe.ZKMember {
		out := make([]recipe.ZKMember, len(z.nodes))
		for i, n := range z.nodes {
			out[i] = recipe.ZKMember{Running: n.PID() != 0, Mode: func() (string, error) { return recipe.ZKMode(dial, n.name, n.Addr()) }}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return z.nodes[i], nil
}

// etcdCluster is an etcd cluster on docker.
type etcdCluster struct{ *cluster }

var _ clusters.Leader = (*etcdCluster)(nil)

// Leader returns the member that a majority of the running members name as
// leader, and that names itself.
func (e *etcdCluster) Leader(ctx context.Context) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hc := recipe.EtcdHTTP(dial)
	i, err := recipe.EtcdLeader(ctx, func() []recipe.EtcdMember {
		out := make([]recipe.EtcdMember, len(e.nodes))
		for i, n := range e.nodes {
			out[i] = recipe.EtcdMember{Running: n.PID() != 0, Status: func() (string, string, error) {
				return recipe.EtcdStatus(hc, n.name, n.Addr())
			}}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return e.nodes[i], nil
}

// sentinelCluster is the redis-sentinel topology on docker: the data nodes
// (redis-1, the first master, redis-2, redis-3) and the Sentinels
// (sentinel-1..3), with the local backend's failover (recipe.Sentinel).
type sentinelCluster struct {
	*cluster
	*recipe.Sentinel
}

var _ clusters.Failoverer = (*sentinelCluster)(nil)

// Addrs returns the Sentinels' addresses: clients find the master through
// them.
func (sc *sentinelCluster) Addrs() []string {
	out := make([]string, len(sc.Sentinels))
	for i, n := range sc.Sentinels {
		out[i] = n.Addr()
	}
	return out
}
