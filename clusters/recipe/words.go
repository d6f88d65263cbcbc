package recipe

import "strings"

// ProbeRequest is a small request the server named node answers at once,
// with a few hundred bytes or more, without changing anything: what a
// probe sends to time a link to it (clusters/proxy). nil for a server
// that speaks first (MariaDB greets every new connection).
func ProbeRequest(node string) []byte {
	switch {
	case strings.HasPrefix(node, "redis-"), strings.HasPrefix(node, "sentinel-"):
		return []byte("INFO server\r\n") // about 1 KB
	case strings.HasPrefix(node, "zk-"):
		return []byte("srvr") // about 300 bytes (4lw whitelisted), then the server closes
	case strings.HasPrefix(node, "etcd-"):
		return []byte("GET /version HTTP/1.1\r\nHost: etcd\r\nConnection: close\r\n\r\n")
	}
	return nil
}
