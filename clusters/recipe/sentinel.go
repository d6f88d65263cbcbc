package recipe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/sleep"
)

// The redis-sentinel topology: one master, two replicas and three Sentinels
// that watch the master and promote a replica when it fails. Clients are
// given the Sentinels' addresses and ask them for the master, by the name
// clusters.SentinelMaster.
//
// Every server has its own writable config file, because Sentinel rewrites
// them: a Sentinel records what it learns (other Sentinels, replicas, the
// current master) in its own file, and after a failover it reconfigures the
// data nodes with REPLICAOF + CONFIG REWRITE. A data node restarted by a
// fault therefore comes back in the role its file last recorded, as a real
// one would.
const (
	// SentinelDownAfter is how long a master must be silent before a
	// Sentinel considers it down; SentinelFailoverTimeout bounds one
	// failover (a new one for the same master waits twice as long).
	SentinelDownAfter       = time.Second
	SentinelFailoverTimeout = 3 * time.Second
	SentinelQuorum          = 2

	// Replicas authenticate to their master as ReplUser. FailPrimary turns
	// that user off on the master to cut replication (see FailPrimary).
	ReplUser = "locktest-repl"
	ReplPass = "locktest-repl-secret"

	SentinelReadyLimit = 30 * time.Second
	promotionLimit     = 30 * time.Second
	rejoinLimit        = 30 * time.Second
	// sentinelReplicaValidity is how long a replica's link to its master
	// may have been down, beyond the master's own time down, for Sentinel
	// still to promote it (10 down-after periods: Redis's
	// SENTINEL_DEFAULT_SLAVE_VALIDITY_FACTOR, sentinelSelectSlave). A
	// replica cut off longer before the master failed is never promoted:
	// the failover aborts (-failover-abort-no-good-slave) again and again.
	sentinelReplicaValidity = 10 * SentinelDownAfter
	// loneGrantLimit bounds how long FailPrimary waits for a lease granted
	// on the cut-off master before it kills the master anyway: half the
	// replicas' validity, which leaves the Sentinels (detection takes
	// down-after plus up to a ping period) room on a busy machine. With
	// 10 s, a run on a machine too busy to grant within 9 s could not fail
	// over at all.
	loneGrantLimit = sentinelReplicaValidity / 2
)

// RedisDataConf is a data node's config file: the replication user (any
// node may become the master), the credentials a replica uses, and
// REPLICAOF when master ("host:port") is not empty. Address, port,
// directory and persistence (none) come from the command line.
func RedisDataConf(master string) (string, error) {
	var b strings.Builder
	b.WriteString("# written by locktest; Sentinel rewrites it after a failover (CONFIG REWRITE)\n")
	fmt.Fprintf(&b, "user %s on >%s +psync +replconf +ping\n", ReplUser, ReplPass)
	fmt.Fprintf(&b, "masteruser %s\nmasterauth %s\n", ReplUser, ReplPass)
	// Diskless full syncs start at once instead of after the default 5 s
	// wait for more replicas: a rejoining node syncs without delay.
	b.WriteString("repl-diskless-sync-delay 0\n")
	if master != "" {
		host, port, err := SplitHostPort(master)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "replicaof %s %d\n", host, port)
	}
	return b.String(), nil
}

// SentinelConf is a Sentinel's own config file, which it rewrites as it
// learns: the master ("host:port") to monitor and the timings SERVERS.md
// verified.
func SentinelConf(master string) (string, error) {
	host, port, err := SplitHostPort(master)
	if err != nil {
		return "", err
	}
	m := clusters.SentinelMaster
	return fmt.Sprintf(`# written by locktest; the Sentinel rewrites it
sentinel monitor %s %s %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, m, host, port, SentinelQuorum, m, SentinelDownAfter.Milliseconds(), m, SentinelFailoverTimeout.Milliseconds(), m), nil
}

// ReplicaAnnounce is the config line that makes a data node tell its master
// the address ip ("" for none: the master then names it by the source
// address of its replication link, which is right on a network whose
// every server has one address). Sentinel learns the replicas, and so the
// candidates for promotion it will hand clients, from the master's list,
// so on the network namespaces of a run the addresses are announced
// explicitly: the one the clients' namespaces reach.
func ReplicaAnnounce(ip string) string {
	if ip == "" {
		return ""
	}
	return fmt.Sprintf("replica-announce-ip %s\n", ip)
}

// SentinelAnnounce is the config lines that make a Sentinel announce itself
// to the other Sentinels (hello messages) as ip:port ("" for none: the
// local address of its link to the master).
func SentinelAnnounce(ip string, port int) string {
	if ip == "" {
		return ""
	}
	return fmt.Sprintf("sentinel announce-ip %s\nsentinel announce-port %d\n", ip, port)
}

// SplitHostPort splits "host:port".
func SplitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("bad address %q", addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("bad address %q: %w", addr, err)
	}
	return addr[:i], port, nil
}

// Sentinel is the failover machinery of a started redis-sentinel topology,
// whatever runs its servers: Data are the data nodes (Data[0] the first
// master), Sentinels the Sentinels. It dials every server directly.
type Sentinel struct {
	Data      []clusters.Node
	Sentinels []clusters.Node

	// AnyMaster: WaitReady takes the master the Sentinels name, whichever
	// data node it is (a stack that an earlier run failed over), instead
	// of Data[0].
	AnyMaster bool

	// Dial, when not nil, opens the harness's own connections to a server
	// of the topology, by address (the local backend dials a node in a
	// network namespace from inside that namespace, where no partition
	// cuts it); nil dials from the harness's namespace.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Isolate, when not nil, cuts node off the network (the node keeps
	// running) and returns what heals it: IsolatePrimary needs it.
	Isolate func(ctx context.Context, node clusters.Node) (heal func(context.Context) error, err error)
	// PromotionLimit bounds how long FailPrimary waits for the Sentinels
	// to name a new master (0: 30 s) before it returns
	// clusters.ErrNoPromotion.
	PromotionLimit time.Duration

	fmu    sync.Mutex    // one FailPrimary or Rejoin at a time
	failed clusters.Node // the master FailPrimary killed or isolated, until Rejoin
	// unpromoted is the address of the master the last FailPrimary failed
	// with no promotion (clusters.ErrNoPromotion), until LatePromotion
	// sees a new master named or the next FailPrimary.
	unpromoted string
	// heal ends the isolation of failed (IsolatePrimary); nil after a kill.
	heal func(context.Context) error
}

var (
	_ clusters.Failoverer   = (*Sentinel)(nil)
	_ clusters.LatePromoter = (*Sentinel)(nil)
	_ clusters.Isolator     = (*Sentinel)(nil)
	_ clusters.Grouped      = (*Sentinel)(nil)
)

// ServerGroups returns the data nodes and the Sentinels, apart: a split
// should leave Sentinels on both sides (see clusters.Grouped).
func (c *Sentinel) ServerGroups() [][]clusters.Node {
	return [][]clusters.Node{slices.Clone(c.Data), slices.Clone(c.Sentinels)}
}

// admin is AdminClient through c.Dial.
func (c *Sentinel) admin(addr string) *redis.Client {
	var dial func(context.Context, string, string) (net.Conn, error)
	if c.Dial != nil {
		dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return c.Dial(ctx, addr) }
	}
	return redis.NewClient(adminOptions(addr, dial))
}

// WaitReady waits until every Sentinel sees the master, both replicas and
// the two other Sentinels, and both replicas have acknowledged every write
// of the master (WAIT asks them at once instead of waiting for their
// once-a-second acknowledgement). Sentinels find each other through hello
// messages every 2 s, so this takes about 2 s.
func (c *Sentinel) WaitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var why string
	for {
		master := c.Data[0].Addr()
		if c.AnyMaster {
			if m, err := c.sentinelMasterAddr(ctx, c.Sentinels[0].Addr()); err == nil && c.dataNode(m) != nil {
				master = m
			}
		}
		why = c.notReady(ctx, master)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-sentinel topology not ready after %s: %s", limit, why)
		}
		if !sleep.For(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// notReady says what is missing, "" when nothing is.
func (c *Sentinel) notReady(ctx context.Context, master string) string {
	for _, s := range c.Sentinels {
		m, err := c.sentinelMaster(ctx, s.Addr())
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Name(), err)
		}
		addr := m["ip"] + ":" + m["port"]
		switch {
		case addr != master:
			return fmt.Sprintf("%s names %s the master, not %s", s.Name(), addr, master)
		case m["flags"] != "master":
			return fmt.Sprintf("%s flags the master %q", s.Name(), m["flags"])
		case m["num-slaves"] != "2":
			return fmt.Sprintf("%s knows %s replicas", s.Name(), m["num-slaves"])
		case m["num-other-sentinels"] != "2":
			return fmt.Sprintf("%s knows %s other sentinels", s.Name(), m["num-other-sentinels"])
		}
	}
	rdb := c.admin(master)
	defer rdb.Close()
	reps, err := OnlineReplicas(ctx, rdb)
	if err != nil {
		return fmt.Sprintf("master: %v", err)
	}
	if len(reps) != 2 {
		return fmt.Sprintf("%d replicas online", len(reps))
	}
	n, err := rdb.Wait(ctx, 2, 200*time.Millisecond).Result()
	if err != nil {
		return fmt.Sprintf("WAIT: %v", err)
	}
	if n != 2 {
		return fmt.Sprintf("%d replicas in sync", n)
	}
	return ""
}

// FailPrimary makes the master lose a lease it granted and then fails it.
//
// Replication to the replicas takes well under a millisecond, so a master
// killed right after a grant has almost always passed it on already: a kill
// alone almost never loses one. To lose a grant for sure, FailPrimary cuts
// the master off from its replicas first: it turns off the user replicas
// authenticate with (ACL SETUSER locktest-repl off) and drops their
// connections (CLIENT KILL TYPE replica). The master keeps serving clients
// and Sentinel keeps seeing it healthy, but the replicas' reconnects (one a
// second) fail with WRONGPASS, so from then on the master writes only into
// its own backlog. (Pausing the replica processes is not enough: the kernel
// still receives the stream into their sockets and they apply it once
// resumed. CLIENT PAUSE and DEBUG SLEEP stop the master, not replication.)
// FailPrimary then waits until the master holds a lease (a key with a TTL)
// that the replica lacks or holds with other content, which is a grant only
// the master knows, kills the master with SIGKILL, and returns once every
// running Sentinel names a new master. The detail tells what was lost and
// when the promotion was seen.
//
// If no such grant comes within 5 s (loneGrantLimit) the master is killed anyway, and the
// detail says so. The cut is undone if the kill does not happen.
func (c *Sentinel) FailPrimary(ctx context.Context) (string, error) {
	return c.failPrimary(ctx, false)
}

// IsolatePrimary is FailPrimary with the master cut off the network instead
// of killed (c.Isolate): it keeps running, with the lone grant, unseen by
// the Sentinels, the replicas and the clients. Rejoin heals it: the old
// master comes back with its stale data, still a master in its own eyes,
// until the Sentinels demote it (they look at a server they had given up
// on every 10 s, so for up to about 10 s there are two masters, and the old
// one still holds leases the new one has handed out again), and it
// resyncs from the new master, dropping its stale data.
func (c *Sentinel) IsolatePrimary(ctx context.Context) (string, error) {
	if c.Isolate == nil {
		return "", errors.New("isolating the master needs the run's network namespaces (the local backend's, started with the network layer)")
	}
	return c.failPrimary(ctx, true)
}

func (c *Sentinel) failPrimary(ctx context.Context, isolate bool) (string, error) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.unpromoted = ""
	oldAddr, err := c.masterAddr(ctx)
	if err != nil {
		return "", err
	}
	old := c.dataNode(oldAddr)
	if old == nil {
		return "", fmt.Errorf("sentinels name %s the master, which is none of the data nodes", oldAddr)
	}
	if old.PID() == 0 {
		return "", fmt.Errorf("%s, the master the sentinels name, is down", old.Name())
	}
	m := c.admin(oldAddr)
	defer m.Close()
	reps, err := OnlineReplicas(ctx, m)
	if err != nil {
		return "", fmt.Errorf("fail primary %s: %w", old.Name(), err)
	}
	if len(reps) == 0 {
		return "", fmt.Errorf("fail primary %s: no replica online to promote", old.Name())
	}
	rep := c.admin(reps[0])
	defer rep.Close()

	// Cut replication.
	if err := m.Do(ctx, "ACL", "SETUSER", ReplUser, "off").Err(); err != nil {
		return "", fmt.Errorf("fail primary %s: turn off the replication user: %w", old.Name(), err)
	}
	killed := false
	defer func() {
		if !killed {
			// Undo the cut: the replicas reconnect within a second.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = m.Do(rctx, "ACL", "SETUSER", ReplUser, "on").Err()
			cancel()
		}
	}()
	if err := m.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		return "", fmt.Errorf("fail primary %s: drop the replicas: %w", old.Name(), err)
	}
	cut := time.Now()

	// Wait for a grant only the master has.
	key, err := waitLoneGrant(ctx, m, rep, loneGrantLimit)
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("fail primary %s: %w", old.Name(), ctx.Err())
	}
	lost := fmt.Sprintf("lease %q granted on it alone %s after the cut", key, time.Since(cut).Round(time.Millisecond))
	if key == "" {
		lost = fmt.Sprintf("no lease granted on it alone within %s (%v)", loneGrantLimit, err)
	}

	// Fail it.
	how, what, done := "SIGKILL", "the kill", "killed"
	if isolate {
		heal, err := c.Isolate(ctx, old)
		if err != nil {
			return "", fmt.Errorf("fail primary: isolate %s: %w", old.Name(), err)
		}
		c.heal = heal
		how, what, done = "isolated (every packet in or out of it dropped)", "the isolation", "isolated"
	} else if err := old.Kill(); err != nil {
		return "", fmt.Errorf("fail primary: %w", err)
	}
	killed = true
	c.failed = old

	newAddr, first, all, err := c.waitPromotion(ctx, oldAddr, cmp.Or(c.PromotionLimit, promotionLimit))
	if err != nil {
		if isolate {
			// No promotion: heal now, the master serves on.
			hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			herr := c.healFailed(hctx, m)
			cancel()
			if herr != nil {
				// Not ErrNoPromotion: the topology is broken.
				return "", fmt.Errorf("%s %s (%s): %v; %w", old.Name(), done, lost, err, herr)
			}
		}
		if errors.Is(err, clusters.ErrNoPromotion) {
			c.unpromoted = oldAddr // a late promotion is still possible
		}
		return "", fmt.Errorf("%s %s (%s): %w", old.Name(), done, lost, err)
	}
	name := newAddr
	if n := c.dataNode(newAddr); n != nil {
		name = fmt.Sprintf("%s (%s)", n.Name(), newAddr)
	}
	return fmt.Sprintf("%s (%s) cut from its replicas; %s; %s; sentinels named %s the master %s after %s (all agreed after %s)",
		old.Name(), oldAddr, lost, how, name, first.Round(time.Millisecond), what, all.Round(time.Millisecond)), nil
}

// healFailed ends the isolation of the failed master: first its
// replication user on again (FailPrimary turned it off; a master it later
// becomes again needs it, and Sentinel's CONFIG REWRITE would record it
// off), while the isolation still hides the master, through m, a
// connection to it that reaches it anyway (c.Dial), then the isolation
// healed. c.failed and c.heal are forgotten.
func (c *Sentinel) healFailed(ctx context.Context, m *redis.Client) error {
	var errs []error
	if err := m.Do(ctx, "ACL", "SETUSER", ReplUser, "on").Err(); err != nil {
		errs = append(errs, fmt.Errorf("replication user of %s back on: %w", c.failed.Name(), err))
	}
	if err := c.heal(ctx); err != nil {
		errs = append(errs, fmt.Errorf("heal %s: %w", c.failed.Name(), err))
	}
	c.failed, c.heal = nil, nil
	return errors.Join(errs...)
}

// waitLoneGrant polls until the master m holds a key with a TTL (a lease)
// that the replica rep lacks or holds with other content, and returns it.
func waitLoneGrant(ctx context.Context, m, rep *redis.Client, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		key, err := loneGrant(ctx, m, rep)
		if key != "" {
			return key, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("none seen")
			}
			return "", err
		}
		if !sleep.For(ctx, 2*time.Millisecond) {
			return "", ctx.Err()
		}
	}
}

func loneGrant(ctx context.Context, m, rep *redis.Client) (string, error) {
	keys, err := m.Keys(ctx, "*").Result()
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		pttl, err := m.Do(ctx, "PTTL", k).Int64()
		if err != nil || pttl <= 0 {
			continue // gone, or no expiry: not a lease
		}
		mine, err := m.Dump(ctx, k).Result()
		if err != nil {
			continue
		}
		theirs, err := rep.Dump(ctx, k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		if mine != theirs {
			return k, nil
		}
	}
	return "", nil
}

// waitPromotion waits until a Sentinel names a master other than old, and
// then until every running Sentinel names the same one. It returns the new
// master and how long after the call the first and the last Sentinel named
// it.
func (c *Sentinel) waitPromotion(ctx context.Context, old string, limit time.Duration) (string, time.Duration, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(limit)
	var newAddr string
	var first time.Duration
	for {
		running, agree := 0, 0
		for _, s := range c.Sentinels {
			if s.PID() == 0 {
				continue
			}
			running++
			addr, err := c.sentinelMasterAddr(ctx, s.Addr())
			if err != nil || addr == old {
				continue
			}
			if newAddr == "" {
				newAddr, first = addr, time.Since(start)
			}
			if addr == newAddr {
				agree++
			}
		}
		if newAddr != "" && agree == running {
			return newAddr, first, time.Since(start), nil
		}
		if time.Now().After(deadline) {
			if newAddr == "" {
				return "", 0, 0, fmt.Errorf("%w: no sentinel named a new master within %s (%s)", clusters.ErrNoPromotion, limit, c.replicasSeen(ctx))
			}
			return "", 0, 0, fmt.Errorf("sentinels did not agree on the new master %s within %s", newAddr, limit)
		}
		if !sleep.For(ctx, 10*time.Millisecond) {
			return "", 0, 0, ctx.Err()
		}
	}
}

// replicasSeen says how the first running Sentinel sees the replicas (for
// a failover that did not happen: Sentinel promotes none that is down, or
// whose link to the master has been down too long, see
// sentinelReplicaValidity).
func (c *Sentinel) replicasSeen(ctx context.Context) string {
	for _, s := range c.Sentinels {
		if s.PID() == 0 {
			continue
		}
		rdb := c.admin(s.Addr())
		v, err := rdb.Do(ctx, "SENTINEL", "REPLICAS", clusters.SentinelMaster).Slice()
		rdb.Close()
		if err != nil {
			return fmt.Sprintf("%s: SENTINEL REPLICAS: %v", s.Name(), err)
		}
		var reps []string
		for _, r := range v {
			f, _ := r.([]any)
			m := map[string]string{}
			for i := 0; i+1 < len(f); i += 2 {
				m[fmt.Sprint(f[i])] = fmt.Sprint(f[i+1])
			}
			reps = append(reps, fmt.Sprintf("%s:%s flags %s, priority %s, link to the master down %s ms, INFO %s ms old, last ok ping %s ms ago",
				m["ip"], m["port"], m["flags"], m["slave-priority"], m["master-link-down-time"], m["info-refresh"], m["last-ok-ping-reply"]))
		}
		master := ""
		if m, err := c.sentinelMaster(ctx, s.Addr()); err == nil {
			master = fmt.Sprintf("the master with flags %s (down %s ms, objectively %s ms; config epoch %s, %s other sentinels) and ",
				m["flags"], cmp.Or(m["s-down-time"], "0"), cmp.Or(m["o-down-time"], "0"), m["config-epoch"], m["num-other-sentinels"])
		}
		return fmt.Sprintf("%s sees %sthe replicas: %s; it promotes no replica that is down, has priority 0, has answered no INFO for 5 s, or whose link has been down more than %s beyond the master's time down",
			s.Name(), master, strings.Join(reps, "; "), sentinelReplicaValidity)
	}
	return "no sentinel running"
}

// Rejoin restarts the master FailPrimary killed, empty, on its old address
// and waits until Sentinel has made it a replica of the new master and it
// is in sync. Its config file still says it is a master (it was killed as
// one), so it starts as an empty master: Sentinel polls each server's INFO
// only every 10 s, so for about 10 s (10.1-10.9 s measured) there are two
// masters and the restarted one is empty. Clients that find the master
// through Sentinel never see it; a client that still connected to its
// address directly would find the lock free. Sentinel then demotes it
// (REPLICAOF the new master) and it resyncs. After IsolatePrimary it heals
// the isolation instead: the old master comes back as it was, a master
// with the stale leases, until Sentinel demotes it the same way. After a
// kill no Sentinel promoted a replica for (clusters.ErrNoPromotion), the
// restarted master is the master again, empty, once the Sentinels name it
// and the replicas have resynced from it. Rejoin does nothing when no
// master failed.
func (c *Sentinel) Rejoin(ctx context.Context) error {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	n := c.failed
	if n == nil {
		return nil
	}
	rdb := c.admin(n.Addr())
	defer rdb.Close()
	if c.heal != nil {
		if err := c.healFailed(ctx, rdb); err != nil {
			return fmt.Errorf("rejoin: %w", err)
		}
	} else if n.PID() == 0 {
		if err := n.Restart(ctx); err != nil {
			return fmt.Errorf("rejoin %s: %w", n.Name(), err)
		}
	}
	c.failed = nil
	deadline := time.Now().Add(rejoinLimit)
	for {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil {
			f := InfoFields(info)
			if f["role"] == "slave" && f["master_link_status"] == "up" {
				return nil
			}
			if f["role"] == "master" && c.servesAgain(ctx, n.Addr(), rdb) {
				return nil // no promotion came (clusters.ErrNoPromotion): the primary again
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rejoin %s: not a replica in sync (nor, no replica promoted, the master again with every replica online) within %s", n.Name(), rejoinLimit)
		}
		if !sleep.For(ctx, 50*time.Millisecond) {
			return fmt.Errorf("rejoin %s: restarted, not yet demoted: %w", n.Name(), ctx.Err())
		}
	}
}

// LatePromotion says whether a Sentinel has named a new master since the
// last FailPrimary gave up waiting for one (clusters.ErrNoPromotion):
// Sentinel finishing its failover past the limit, on a starved machine.
// Every running Sentinel is asked (one that has not heard of the promotion
// yet still names the old master). It says so once, with a line naming
// the new master; while every running Sentinel names the old master (as
// when Rejoin found it the master again), it says nothing. A Sentinel
// counts only when the data node it names says it is a master. The old
// master then counts as failed again, so that Rejoin waits until it is the
// new master's replica: after an isolation it was healed already, and
// after a kill Rejoin may have found it the master again before the
// promotion.
func (c *Sentinel) LatePromotion(ctx context.Context) (string, bool) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.unpromoted == "" {
		return "", false
	}
	addr := ""
	for _, s := range c.Sentinels {
		if s.PID() == 0 {
			continue
		}
		if a, err := c.sentinelMasterAddr(ctx, s.Addr()); err == nil && a != c.unpromoted && c.dataNode(a) != nil && c.isMaster(ctx, a) {
			addr = a
			break
		}
	}
	if addr == "" {
		return "", false
	}
	old := c.unpromoted
	c.unpromoted = ""
	if c.failed == nil {
		c.failed = c.dataNode(old)
	}
	return fmt.Sprintf("sentinels named %s the master after FailPrimary stopped waiting for a promotion (the failed master was %s); seen when this was recorded, it came earlier", c.dataNode(addr).Name()+" ("+addr+")", old), true
}

// isMaster reports whether the data node at addr says it is a master.
func (c *Sentinel) isMaster(ctx context.Context, addr string) bool {
	rdb := c.admin(addr)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	return err == nil && InfoFields(info)["role"] == "master"
}

// servesAgain reports whether the restarted master at addr is the master
// once more, after a failure no Sentinel promoted a replica for: every
// running Sentinel names it, and every other data node is its replica
// again, online.
func (c *Sentinel) servesAgain(ctx context.Context, addr string, rdb *redis.Client) bool {
	for _, s := range c.Sentinels {
		if s.PID() == 0 {
			continue
		}
		if a, err := c.sentinelMasterAddr(ctx, s.Addr()); err != nil || a != addr {
			return false
		}
	}
	reps, err := OnlineReplicas(ctx, rdb)
	return err == nil && len(reps) == len(c.Data)-1
}

// MasterAddr asks the Sentinels, in order, for the master's address (the
// partition fault aims its split at it).
func (c *Sentinel) MasterAddr(ctx context.Context) (string, error) { return c.masterAddr(ctx) }

// Probe checks that every Sentinel still names Data[0], the master the
// topology started with (clusters.Prober: a pooled cluster is used again
// only then).
func (c *Sentinel) Probe(ctx context.Context) error {
	master := c.Data[0].Addr()
	for _, s := range c.Sentinels {
		addr, err := c.sentinelMasterAddr(ctx, s.Addr())
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
		if addr != master {
			return fmt.Errorf("%s names another master: %s", s.Name(), addr)
		}
	}
	return nil
}

// masterAddr asks the Sentinels, in order, for the master's address.
func (c *Sentinel) masterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range c.Sentinels {
		if s.PID() == 0 {
			continue
		}
		addr, err := c.sentinelMasterAddr(ctx, s.Addr())
		if err == nil {
			return addr, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.Name(), err))
	}
	return "", fmt.Errorf("no sentinel named the master: %w", errors.Join(errs...))
}

func (c *Sentinel) dataNode(addr string) clusters.Node {
	for _, n := range c.Data {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// AdminClient is a short-lived connection for the topology's own commands:
// no retries, short deadlines.
func AdminClient(addr string) *redis.Client {
	return redis.NewClient(adminOptions(addr, nil))
}

func adminOptions(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *redis.Options {
	return &redis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1, Protocol: 2, DisableIdentity: true,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ContextTimeoutEnabled: true, Dialer: dial,
	}
}

// sentinelMaster returns SENTINEL MASTER's fields for the monitored master.
func (c *Sentinel) sentinelMaster(ctx context.Context, sentinel string) (map[string]string, error) {
	rdb := c.admin(sentinel)
	defer rdb.Close()
	v, err := rdb.Do(ctx, "SENTINEL", "MASTER", clusters.SentinelMaster).Slice()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v); i += 2 {
		out[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
	}
	return out, nil
}

// sentinelMasterAddr asks one Sentinel for the master's address, as clients
// do.
func (c *Sentinel) sentinelMasterAddr(ctx context.Context, sentinel string) (string, error) {
	rdb := c.admin(sentinel)
	defer rdb.Close()
	v, err := rdb.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", clusters.SentinelMaster).StringSlice()
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("unexpected reply %q", v)
	}
	return v[0] + ":" + v[1], nil
}

// OnlineReplicas returns the addresses of the replicas the master at rdb
// lists as online.
func OnlineReplicas(ctx context.Context, rdb *redis.Client) ([]string, error) {
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	f := InfoFields(info)
	if f["role"] != "master" {
		return nil, fmt.Errorf("role %s, not master", f["role"])
	}
	var out []string
	for i := 0; ; i++ {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
		v, ok := f[fmt.Sprintf("slave%d", i)]
		if !ok {
			break
		}
		kv := map[string]string{}
		for _, p := range strings.Split(v, ",") {
			if a, b, ok := strings.Cut(p, "="); ok {
				kv[a] = b
			}
		}
		if kv["state"] == "online" {
			out = append(out, kv["ip"]+":"+kv["port"])
		}
	}
	return out, nil
}

// InfoFields parses INFO's key:value lines.
func InfoFields(info string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}
