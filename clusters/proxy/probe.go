package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters/recipe"
)

// Measure is what a probe of a link saw.
type Measure struct {
	// FirstByte is the time from the request's write to the answer's first
	// byte (0 when none came).
	FirstByte time.Duration
	Bytes     int  // the answer's first read
	Reset     bool // the connection was reset or closed before any answer
	Silent    bool // no answer within the probe's time
}

// Probe opens a connection through l's proxy as the client would, sends
// the server a small request (recipe.ProbeRequest) and waits, up to timeout
// and not past the end of ctx, for
// the first bytes of the answer. An error is a probe that could not be
// made (the connection could not even be opened, a namespace not
// entered): it proves nothing either way.
func (l *Link) Probe(ctx context.Context, timeout time.Duration) (Measure, error) {
	c, err := l.Client.DialAsClient(l.Server.Addr, timeout)
	if err != nil {
		return Measure{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	t0 := time.Now()
	_ = c.SetDeadline(t0.Add(timeout))
	if w := recipe.ProbeRequest(l.Server.Name); len(w) > 0 {
		if _, err := c.Write(w); err != nil {
			return Measure{Reset: true}, nil
		}
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if ctx.Err() != nil {
		return Measure{}, fmt.Errorf("probe of %s->%s: %w", l.Client.Name, l.Server.Name, ctx.Err())
	}
	switch {
	case n > 0:
		return Measure{FirstByte: time.Since(t0), Bytes: n}, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return Measure{Silent: true}, nil
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), isClosed(err):
		return Measure{Reset: true}, nil
	}
	return Measure{}, err
}

func isClosed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
