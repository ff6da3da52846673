package dbtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a real PostgreSQL server, so that a
// test can cut the database off (Down: every connection reset, new ones
// refused) and bring it back (Up) without touching the server.
type Proxy struct {
	target string

	mu    sync.Mutex
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy in front of the server of databaseURL and returns
// it with databaseURL rewritten to go through it.
func NewProxy(t testing.TB, databaseURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: u.Host, conns: map[net.Conn]struct{}{}}
	p.Up()
	t.Cleanup(p.Down)
	u.Host = p.addr
	return p, u.String()
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
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
