package jobs

import (
	"net"
	"net/http/httptest"
	"sync/atomic"
)

// countingServer is an httptest server that counts the requests it gets.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func (s *countingServer) port() int { return s.Listener.Addr().(*net.TCPAddr).Port }

// hostPort is the server's "127.0.0.1:port", usable as an allow entry.
func (s *countingServer) hostPort() string { return s.Listener.Addr().String() }
