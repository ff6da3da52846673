// Package bufpool keeps byte slices for reuse between requests: the batch
// API's response bodies and the COPY streams of batch enqueues, each
// hundreds of kilobytes, written once per request.
package bufpool

import "sync"

// MaxKept is the largest capacity a Pool keeps: a slice that large
// payloads grew past it goes to the collector instead, so that one
// outsized request does not pin its memory for the life of the process.
const MaxKept = 4 << 20

// Pool is a sync.Pool of byte slices. The zero value is ready to use.
type Pool struct{ p sync.Pool }

// Get returns a slice to append to from index 0, empty or reused.
func (p *Pool) Get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// Put gives b back for reuse once its contents are no longer needed;
// the caller stores what it appended in *b first. A slice grown past
// MaxKept is dropped.
func (p *Pool) Put(b *[]byte) {
	if cap(*b) <= MaxKept {
		p.p.Put(b)
	}
}
