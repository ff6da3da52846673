package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
)

// answers keeps what the enqueues of an API load were answered: the ids
// acknowledged with 201, the answers by status code, the requests left
// unanswered, and the answers no client should get.
type answers struct {
	mu          sync.Mutex
	acked       []uuid.UUID
	status      map[int]int // answers by status code
	unanswered  int         // no answer (connection error, timeout)
	unexpected  []string    // answers other than 201 and an accepted 503 (the first 100)
	lastAckedAt time.Time
}

// record tallies one enqueue's answer (resp and err as the client's Do
// returned them). n is how many jobs it sent (0: not checked against the
// ids answered); a 503 is accepted when it carries Retry-After and busy
// says its body is one a client should retry.
func (a *answers) record(resp *http.Response, err error, n int, busy func(body string) bool) {
	if err != nil {
		a.mu.Lock()
		a.unanswered++
		a.mu.Unlock()
		return
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status == nil {
		a.status = map[int]int{}
	}
	a.status[resp.StatusCode]++
	switch {
	case resp.StatusCode == http.StatusCreated:
		var j struct {
			ID   uuid.UUID `json:"id"`
			Jobs []struct {
				ID uuid.UUID `json:"id"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(raw, &j); err != nil || (n > 0 && j.ID == uuid.Nil && len(j.Jobs) != n) {
			a.unexpect(fmt.Sprintf("201 with an unreadable body: %s", raw))
			return
		}
		if j.ID != uuid.Nil {
			a.acked = append(a.acked, j.ID)
		}
		for _, b := range j.Jobs {
			a.acked = append(a.acked, b.ID)
		}
		a.lastAckedAt = time.Now()
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" && busy(string(raw)):
	default:
		a.unexpect(fmt.Sprintf("%d %s", resp.StatusCode, raw))
	}
}

// unexpect keeps an answer no client should get; a.mu is held.
func (a *answers) unexpect(what string) {
	if len(a.unexpected) < 100 {
		a.unexpected = append(a.unexpected, what)
	}
}
