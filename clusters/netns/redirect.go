package netns

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// Redirect sends the TCP connections a host opens to From (a server's
// host:port) to To (a port the harness listens on inside the same
// namespace) instead.
type Redirect struct {
	From string // the address the client dials, e.g. 198.18.0.2:6379
	To   string // where the connection lands, e.g. 198.18.0.7:41233
}

// SetRedirects replaces h's redirects with rs: DNAT rules in the nat table
// of h's own namespace, on the connections its processes open (OUTPUT),
// except those marked BypassMark (the harness's own). The filter table,
// where partitions live, is left alone: a partition still drops what the
// redirected connection's proxy sends on to the server. An empty rs
// removes every redirect.
func (h *Host) SetRedirects(ctx context.Context, rs []Redirect) error {
	var rules bytes.Buffer
	rules.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, r := range rs {
		ip, port, err := net.SplitHostPort(r.From)
		if err != nil {
			return fmt.Errorf("redirect %s: %w", r.From, err)
		}
		if _, _, err := net.SplitHostPort(r.To); err != nil {
			return fmt.Errorf("redirect to %s: %w", r.To, err)
		}
		fmt.Fprintf(&rules, "-A OUTPUT -d %s/32 -p tcp --dport %s -m mark ! --mark 0x%x -j DNAT --to-destination %s\n", ip, port, BypassMark, r.To)
	}
	rules.WriteString("COMMIT\n")
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "iptables-restore")
	cmd.Stdin = &rules
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("redirects in %s (%s): %v: %s", h.NS, h.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
