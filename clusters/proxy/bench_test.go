package proxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkIdleProxy measures what an idle proxy (no toxic) adds to a
// request's round trip: redis PING on one open connection from a client's
// namespace, straight to the server (marked, as the harness's own
// connections) and through the link's proxy (as the client's are). Compare
// the two ns/op: their difference is the proxy's added latency.
func BenchmarkIdleProxy(b *testing.B) {
	_, _, h, cl := redisNet(b)
	addr := cl.Nodes()[0].Addr()
	for _, tc := range []struct {
		name string
		dial func(string, time.Duration) (net.Conn, error)
	}{
		{"direct", h.Dial},
		{"proxied", h.DialAsClient},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := tc.dial(addr, 2*time.Second)
			require.NoError(b, err)
			defer c.Close()
			r := bufio.NewReader(c)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Write([]byte("PING\r\n")); err != nil {
					b.Fatal(err)
				}
				if _, err := r.ReadString('\n'); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
