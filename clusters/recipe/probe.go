package recipe

import (
	"bufio"
	"fmt"
	"strings"
	"time"
)

// ReplyError is a server's answer that is not the one its probe wants: the
// server runs and speaks, but does not serve (yet).
type ReplyError struct {
	Server string // the node's name, or its address
	Reply  string
}

func (e *ReplyError) Error() string { return fmt.Sprintf("%s answered %q", e.Server, e.Reply) }

// RedisPing sends an inline PING to the Redis server or Sentinel at addr
// and waits (500 ms at most) for +PONG.
func RedisPing(dial Dial, addr string) error {
	c, err := dial(addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// MySQLGreets reads the handshake the MariaDB server at addr sends first
// (it names its version) and fails unless it comes within a second: a
// frozen server accepts the connection but never greets.
func MySQLGreets(dial Dial, name, addr string) error {
	c, err := dial(addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var got []byte
	buf := make([]byte, 512)
	for !strings.Contains(string(got), "MariaDB") {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			if len(got) > 0 {
				return &ReplyError{Server: name, Reply: string(got)}
			}
			return err
		}
	}
	return nil
}
