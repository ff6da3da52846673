package domain

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// AuditEntry records one operator action.
type AuditEntry struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Source  string          `json:"source"` // api or dashboard
	IP      string          `json:"ip"`
	Action  string          `json:"action"`
	JobID   *uuid.UUID      `json:"job_id,omitempty"`
	Details json.RawMessage `json:"details"`
}

// AuditQuery pages the audit trail, newest first.
type AuditQuery struct {
	JobID  *uuid.UUID
	Before int64 // entries with a smaller id; 0 means the newest
	Limit  int
}

// Audit actions that cancel jobs, as the audit trail names them.
const (
	AuditCancel = "cancel"
	// AuditSeriesPause and AuditSeriesDelete name the pending occurrence
	// they cancelled, if any.
	AuditSeriesPause  = "series_pause"
	AuditSeriesDelete = "series_delete"
)
