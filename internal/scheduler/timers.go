package scheduler

import (
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

// parseTimers reads a ChannelScheduled payload; malformed parts are
// skipped (the sweep and the periodic rebuild cover them).
func parseTimers(payload string) []domain.Timer {
	var out []domain.Timer
	for _, part := range strings.Split(payload, ",") {
		f := strings.Fields(part)
		if len(f) != 4 {
			continue
		}
		id, err := uuid.Parse(f[0])
		if err != nil {
			continue
		}
		runMS, err1 := strconv.ParseInt(f[1], 10, 64)
		prio, err2 := strconv.ParseFloat(f[2], 64)
		createdUS, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, domain.Timer{ID: id, Priority: prio, RunAt: time.UnixMilli(runMS), CreatedAt: time.UnixMicro(createdUS)})
	}
	return out
}
