package dbtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a real PostgreSQL server (or any TCP
// server), so that a test can cut the database off (Down: every connection
// reset, new ones refused) and bring it back (Up) without touching the
// server, or partition the network while every connection stays open:
// Swallow drops every byte in both directions (a firewall or NAT that lost
// the connections' state), Stall stops reading (packets delayed: TCP
// retransmits them, and they arrive once the link is back), and Heal
// forwards again, draining what a stall held back.
type Proxy struct {
	target string

	mu    sync.Mutex
	cond  *sync.Cond // signalled when fault changes
	fault Fault
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
}

// Fault is what a Proxy does to the bytes it carries.
type Fault int

// The faults of a Proxy.
const (
	// Forward carries every byte: no fault.
	Forward Fault = iota
	// Swallowing reads every byte and drops it.
	Swallowing
	// Stalled reads nothing, so that the senders' buffers fill and TCP
	// holds the rest back until the proxy reads again.
	Stalled
)

// Swallow drops every byte from now on, in both directions, on open
// connections and new ones alike, until Heal.
func (p *Proxy) Swallow() { p.setFault(Swallowing) }

// Stall stops reading from every connection until Heal.
func (p *Proxy) Stall() { p.setFault(Stalled) }

// Heal forwards again.
func (p *Proxy) Heal() { p.setFault(Forward) }

func (p *Proxy) setFault(f Fault) {
	p.mu.Lock()
	p.fault = f
	p.cond.Broadcast()
	p.mu.Unlock()
}

// waitNotStalled blocks while the proxy is stalled and reports whether
// bytes are to be forwarded (false: swallowed).
func (p *Proxy) waitNotStalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.fault == Stalled {
		p.cond.Wait()
	}
	return p.fault == Forward
}

// NewProxy starts a proxy in front of the server of databaseURL and returns
// it with databaseURL rewritten to go through it.
func NewProxy(t testing.TB, databaseURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := NewTCPProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// NewTCPProxy starts a proxy in front of the TCP server at target.
func NewTCPProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.Up()
	t.Cleanup(func() {
		p.Heal()
		p.Down()
	})
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Up accepts connections again, on the same address.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic("proxy: listen: " + err.Error())
	}
	p.ln, p.addr = ln, ln.Addr().String()
	go p.accept(ln)
}

// Down closes the listener and resets every open connection.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		p.waitNotStalled() // a stalled proxy reads nothing
		n, err := src.Read(buf)
		// What was read just before a stall waits for Heal; swallowed
		// bytes are dropped.
		if n > 0 && p.waitNotStalled() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
