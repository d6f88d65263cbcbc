package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/stretchr/testify/require"
)

// heldLink is a link whose answers (downstream) run through the link's
// toxics from a pipe the test writes to a pipe it reads: the toxics'
// logic with no network under it.
func heldLink(t *testing.T) (*Set, *Link, io.Writer, io.Reader) {
	t.Helper()
	s := New(nil, 7)
	p := toxiproxy.NewProxy(s.api, "held", "127.0.0.1:0", "127.0.0.1:1")
	srcR, srcW := io.Pipe()
	dstR, dstW := io.Pipe()
	p.Toxics.StartLink(s.api, "held-downstream", srcR, dstW, stream.Downstream)
	t.Cleanup(func() { _ = srcW.Close(); _ = dstR.Close() })
	return s, &Link{proxy: p, conns: map[*net.TCPConn]bool{}}, srcW, dstR
}

// readAfter writes b into the link and returns how long its answer took to
// come out.
func readAfter(t *testing.T, w io.Writer, r io.Reader, b string, meanwhile func()) time.Duration {
	t.Helper()
	t0 := time.Now()
	_, err := w.Write([]byte(b))
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(r, buf, len(b))
		got <- string(buf[:n])
	}()
	meanwhile()
	select {
	case s := <-got:
		require.Equal(t, b, s)
	case <-time.After(10 * time.Second):
		t.Fatal("the chunk never came out")
	}
	return time.Since(t0)
}

// A chunk a delay holds stays held its full delay when another toxic goes
// on (or comes off) the same direction of the link meanwhile: Toxiproxy
// interrupts the delay's stream then, and a delay that let its chunk out
// at once would make the late-grant explanation's "held its answers back
// at least" untrue whenever two network faults overlap on a link.
func TestDelayHoldsAcrossOtherToxics(t *testing.T) {
	s, l, w, r := heldLink(t)
	const latency = 600 * time.Millisecond
	removeDelay, err := s.Apply([]*Link{l}, Toxic{Kind: Delay, Direction: Downstream, Latency: latency})
	require.NoError(t, err)
	took := readAfter(t, w, r, "grant", func() {
		time.Sleep(100 * time.Millisecond)
		removeLoss, err := s.Apply([]*Link{l}, Toxic{Kind: Loss, Direction: Downstream, Share: 0})
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, removeLoss())
	})
	require.GreaterOrEqual(t, took, latency, "held back less than its delay")

	// Taking the delay off lets what it holds out at once, in order.
	took = readAfter(t, w, r, "late", func() {
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, removeDelay())
	})
	require.Less(t, took, latency, "a removed delay still held its chunk")
}
