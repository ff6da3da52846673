package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// freeAddr returns a loopback address with a port nothing listens on, for
// a server a test starts as a process of its own.
//
// The port is found free and then closed, so something else may take it
// before the server binds it. Asking the kernel for port 0 made that
// likely under a parallel run: port 0 is drawn from the ephemeral range,
// the one the kernel also gives every outgoing connection, and with
// hundreds of connections opening a server would now and then find its
// port taken ("address already in use") and the test waited a minute for
// a server that had exited. So ports come from below that range, which
// outgoing connections never use, handed out in turn (never twice in one
// run) from a random start, so that runs side by side rarely meet.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.hi == 0 {
		ports.lo, ports.hi = 10000, ephemeralLow()-1
		ports.next = ports.lo + rand.IntN(max(ports.hi-ports.lo, 1))
	}
	if ports.hi-ports.lo < 1000 { // no room below the range: the kernel's pick
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().String()
	}
	for range ports.hi - ports.lo {
		if ports.next++; ports.next > ports.hi {
			ports.next = ports.lo
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports.next)
		if ln, err := net.Listen("tcp", addr); err == nil {
			require.NoError(t, ln.Close())
			return addr
		}
	}
	t.Fatalf("no free port between %d and %d", ports.lo, ports.hi)
	return ""
}

var ports struct {
	sync.Mutex
	lo, hi, next int
}

// ephemeralLow is the lowest port the kernel gives outgoing connections
// (Linux's ip_local_port_range; its default where it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var hi int
		if _, err := fmt.Sscan(string(b), &low, &hi); err != nil || low < 1024 {
			low = 32768
		}
	}
	return low
}
