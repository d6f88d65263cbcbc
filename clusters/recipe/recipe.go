// Package recipe holds what the local and the docker backends share about
// each server: config files and command-line flags, the probes that say
// whether a server serves and which role it has, and the failover steps of
// the replicated topologies. A backend decides where a server runs (a
// process, a container); a recipe says how it is set up and asked.
package recipe

import (
	"net"
	"time"
)

// Dial opens a TCP connection to addr, from wherever the backend must dial
// from (a node's network namespace; the root namespace for a container on
// a Docker bridge).
type Dial func(addr string, timeout time.Duration) (net.Conn, error)
