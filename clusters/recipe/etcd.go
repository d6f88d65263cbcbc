package recipe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/locktest/locktest/internal/sleep"
)

// Etcd timings: heartbeat 100 ms and election timeout 500 ms, so a new
// leader is elected within about a second.
const (
	EtcdHeartbeatMs = 100
	EtcdElectionMs  = 500
)

// EtcdArgs is the command line of one member (etcd first). listenClient and
// listenPeer are where it listens (an address of its own, or 0.0.0.0 in a
// container); clientAddr and peerAddr are how the others reach it; initial
// is the --initial-cluster list (name=http://peer,...).
func EtcdArgs(name, dataDir, listenClient, clientAddr, listenPeer, peerAddr, initial string) []string {
	return []string{"etcd", "--name", name, "--data-dir", dataDir,
		"--logger=zap", "--log-outputs=stderr",
		"--listen-client-urls", "http://" + listenClient, "--advertise-client-urls", "http://" + clientAddr,
		"--listen-peer-urls", "http://" + listenPeer, "--initial-advertise-peer-urls", "http://" + peerAddr,
		"--initial-cluster", initial, "--initial-cluster-state", "new",
		"--initial-cluster-token", "locktest",
		"--heartbeat-interval", fmt.Sprint(EtcdHeartbeatMs), "--election-timeout", fmt.Sprint(EtcdElectionMs)}
}

// EtcdHTTP is a short-lived HTTP client that dials with dial.
func EtcdHTTP(dial Dial) *http.Client {
	return &http.Client{
		Timeout: time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return dial(addr, 500*time.Millisecond)
			},
		},
	}
}

// EtcdHealthy asks /health, which says true once the member has a leader
// and serves.
func EtcdHealthy(c *http.Client, name, addr string) error {
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"true"`) {
		return fmt.Errorf("%s unhealthy: %s", name, strings.TrimSpace(string(b)))
	}
	return nil
}

// EtcdStatus returns the member's id and the id of the leader it knows.
func EtcdStatus(c *http.Client, name, addr string) (member, leader string, err error) {
	resp, err := c.Post("http://"+addr+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", "", fmt.Errorf("%s status: %w", name, err)
	}
	return st.Header.MemberID, st.Leader, nil
}

// EtcdVersion asks the member at addr for its version (/version).
func EtcdVersion(c *http.Client, addr string) string {
	resp, err := c.Get("http://" + addr + "/version")
	if err != nil {
		return "etcd (version unknown)"
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil || v.Server == "" {
		return "etcd (version unknown)"
	}
	return "etcd " + v.Server
}

// EtcdMember is what EtcdLeader asks of one member.
type EtcdMember struct {
	Running bool
	Status  func() (member, leader string, err error)
}

// EtcdLeader returns the index of the member that a majority of the running
// members name as leader and that is itself running, waiting (bounded by
// ctx) while an election is under way.
func EtcdLeader(ctx context.Context, members func() []EtcdMember) (int, error) {
	var last error = fmt.Errorf("no leader")
	for {
		ms := members()
		ids := map[string]int{}
		votes := map[string]int{}
		for i, m := range ms {
			if !m.Running {
				continue
			}
			id, l, err := m.Status()
			if err != nil {
				last = err
				continue
			}
			ids[id] = i
			if l != "" && l != "0" {
				votes[l]++
			}
		}
		for id, v := range votes {
			if i, ok := ids[id]; ok && v >= len(ms)/2+1 {
				return i, nil
			}
		}
		if !sleep.For(ctx, 100*time.Millisecond) {
			return -1, fmt.Errorf("etcd leader: %w (%w)", last, ctx.Err())
		}
	}
}
