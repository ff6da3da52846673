package db

import (
	"time"

	"github.com/google/uuid"
)

// uuidTime returns the millisecond a UUIDv7 was made in.
func uuidTime(id uuid.UUID) time.Time {
	var ms int64
	for i := 0; i < 6; i++ {
		ms = ms<<8 | int64(id[i])
	}
	return time.UnixMilli(ms)
}

// uuidV7Floor returns the smallest UUIDv7 of the millisecond t: every id
// generated after t compares above it.
func uuidV7Floor(t time.Time) uuid.UUID {
	var u uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		u[i] = byte(ms)
		ms >>= 8
	}
	u[6] = 0x70
	u[8] = 0x80
	return u
}
