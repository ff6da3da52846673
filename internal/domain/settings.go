package domain

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flinthq/flint/internal/jsonutil"
	"github.com/flinthq/flint/jobs"
)

// Scheduling strategies for the in-memory index of scheduled work.
const (
	StrategyHeap        = "heap"
	StrategyTimingWheel = "timing_wheel"
)

// Settings are the runtime settings: stored in the settings table, changed
// through the API without a restart, and picked up by every process.
type Settings struct {
	// SchedulerStrategy picks the in-memory index: heap or timing_wheel.
	SchedulerStrategy string `json:"scheduler_strategy"`
	// DLQThreshold: an alert email goes out when the DLQ holds at least
	// this many jobs.
	DLQThreshold int `json:"dlq_threshold"`
	// AlertEmails receive DLQ alerts.
	AlertEmails []string `json:"alert_emails"`
	// AlertCooldownSeconds is the least time between two alert emails.
	AlertCooldownSeconds int `json:"alert_cooldown_seconds"`
	// Priority aging: medium jobs waiting longer than AgingMediumAfter and
	// low jobs waiting longer than AgingLowAfter lose AgingStep of their
	// effective priority every AgingInterval, down to AgingFloor.
	AgingMediumAfterSeconds int     `json:"aging_medium_after_seconds"`
	AgingLowAfterSeconds    int     `json:"aging_low_after_seconds"`
	AgingStep               float64 `json:"aging_step"`
	AgingIntervalSeconds    int     `json:"aging_interval_seconds"`
	AgingFloor              float64 `json:"aging_floor"`
	// DefaultMaxRetries applies to jobs enqueued without max_retries.
	DefaultMaxRetries int `json:"default_max_retries"`
	// Retention, in days, of finished jobs per final state and of the bin;
	// 0 keeps them forever.
	RetentionCompletedDays int `json:"retention_completed_days"`
	RetentionCancelledDays int `json:"retention_cancelled_days"`
	RetentionDeadDays      int `json:"retention_dead_letter_days"`
	RetentionBinDays       int `json:"retention_bin_days"`
	// HistoryAfterMinutes: a finished job moves from the live table to
	// the history (partitioned by day, so retention drops whole days)
	// this long after it finished; 0 keeps finished jobs in the live
	// table, where retention deletes them row by row.
	HistoryAfterMinutes int `json:"history_after_minutes"`
	// AuditRetentionDays keeps the audit trail this long; 0 for ever.
	AuditRetentionDays int `json:"audit_retention_days"`
	// LogRetentionDays keeps the entries of the Logs page (every process's
	// log) this long; 0 for ever.
	LogRetentionDays int `json:"log_retention_days"`
}

// DefaultSettings returns the settings a new installation starts with.
func DefaultSettings() Settings {
	return Settings{
		SchedulerStrategy:       StrategyHeap,
		DLQThreshold:            5,
		AlertEmails:             []string{},
		AlertCooldownSeconds:    900,
		AgingMediumAfterSeconds: 120,
		AgingLowAfterSeconds:    300,
		AgingStep:               0.1,
		AgingIntervalSeconds:    30,
		AgingFloor:              1.0,
		DefaultMaxRetries:       DefaultMaxRetries,
		RetentionCompletedDays:  7,
		RetentionCancelledDays:  7,
		RetentionDeadDays:       30,
		RetentionBinDays:        30,
		HistoryAfterMinutes:     5,
		AuditRetentionDays:      90,
		LogRetentionDays:        7,
	}
}

// AgingInterval returns the aging cycle.
func (s Settings) AgingInterval() time.Duration {
	return time.Duration(s.AgingIntervalSeconds) * time.Second
}

// AgingBound returns the longest a job of the given priority waits, under
// any stream of higher-priority work, before its effective priority reaches
// the floor and it competes as a high-priority job by age: the wait
// threshold plus the cycles aging takes, plus one cycle of slack for where
// in the cycle it started.
func (s Settings) AgingBound(priority int) time.Duration {
	var after int
	switch priority {
	case jobs.PriorityMedium:
		after = s.AgingMediumAfterSeconds
	case jobs.PriorityLow:
		after = s.AgingLowAfterSeconds
	default:
		return 0
	}
	steps := 0
	if s.AgingStep > 0 {
		for p := float64(priority); p > s.AgingFloor+1e-9; p -= s.AgingStep {
			steps++
		}
	}
	return time.Duration(after)*time.Second + time.Duration(steps+1)*s.AgingInterval()
}

// Validate checks every setting, naming the first bad one.
func (s *Settings) Validate() error {
	switch s.SchedulerStrategy {
	case StrategyHeap, StrategyTimingWheel:
	default:
		return jobs.Invalid("scheduler_strategy", "must be %q or %q", StrategyHeap, StrategyTimingWheel)
	}
	if s.DLQThreshold < 1 || s.DLQThreshold > 1_000_000 {
		return jobs.Invalid("dlq_threshold", "must be between 1 and 1000000")
	}
	if err := validateEmails("alert_emails", s.AlertEmails); err != nil {
		return err
	}
	if s.AlertCooldownSeconds < 0 || s.AlertCooldownSeconds > 7*24*3600 {
		return jobs.Invalid("alert_cooldown_seconds", "must be between 0 and 604800")
	}
	if s.AgingMediumAfterSeconds < 0 || s.AgingMediumAfterSeconds > 7*24*3600 {
		return jobs.Invalid("aging_medium_after_seconds", "must be between 0 and 604800")
	}
	if s.AgingLowAfterSeconds < 0 || s.AgingLowAfterSeconds > 7*24*3600 {
		return jobs.Invalid("aging_low_after_seconds", "must be between 0 and 604800")
	}
	if !(s.AgingStep > 0 && s.AgingStep <= 2) {
		return jobs.Invalid("aging_step", "must be more than 0 and at most 2")
	}
	if s.AgingIntervalSeconds < 1 || s.AgingIntervalSeconds > 3600 {
		return jobs.Invalid("aging_interval_seconds", "must be between 1 and 3600")
	}
	if !(s.AgingFloor >= 1 && s.AgingFloor <= 3) {
		return jobs.Invalid("aging_floor", "must be between 1 and 3")
	}
	if s.DefaultMaxRetries < 0 || s.DefaultMaxRetries > jobs.MaxRetriesLimit {
		return jobs.Invalid("default_max_retries", "must be between 0 and %d", jobs.MaxRetriesLimit)
	}
	if s.HistoryAfterMinutes < 0 || s.HistoryAfterMinutes > 7*24*60 {
		return jobs.Invalid("history_after_minutes", "must be between 0 (keep finished jobs in the live table) and 10080 (a week)")
	}
	for _, r := range []struct {
		name string
		v    int
	}{
		{"retention_completed_days", s.RetentionCompletedDays},
		{"retention_cancelled_days", s.RetentionCancelledDays},
		{"retention_dead_letter_days", s.RetentionDeadDays},
		{"retention_bin_days", s.RetentionBinDays},
		{"audit_retention_days", s.AuditRetentionDays},
		{"log_retention_days", s.LogRetentionDays},
	} {
		if r.v < 0 || r.v > 3650 {
			return jobs.Invalid(r.name, "must be between 0 (keep forever) and 3650 days")
		}
	}
	return nil
}

// Patch applies a partial update given as JSON fields, validates the
// result, and returns it with the names of the settings that changed.
func (s Settings) Patch(patch map[string]json.RawMessage) (Settings, []string, error) {
	if len(patch) == 0 {
		return s, nil, jobs.Invalid("", "send at least one setting to change")
	}
	known := s.Map()
	next := s
	for k, raw := range patch {
		if _, ok := known[k]; !ok {
			return s, nil, jobs.Invalid(k, "unknown setting (known: %s)", strings.Join(SettingNames(), ", "))
		}
		one, _ := json.Marshal(map[string]json.RawMessage{k: raw})
		dec := json.NewDecoder(bytes.NewReader(one))
		if err := dec.Decode(&next); err != nil {
			return s, nil, jobs.Invalid(k, "%s", jsonutil.DescribeJSONError(err))
		}
	}
	if next.AlertEmails == nil {
		next.AlertEmails = []string{}
	}
	if err := next.Validate(); err != nil {
		return s, nil, err
	}
	before, after := s.Map(), next.Map()
	var changed []string
	for k := range patch {
		if !bytes.Equal(before[k], after[k]) {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	return next, changed, nil
}

// Map returns each setting's JSON value by name.
func (s Settings) Map() map[string]json.RawMessage {
	b, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m
}

// SettingNames lists the settings, sorted.
func SettingNames() []string {
	m := DefaultSettings().Map()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SettingsHolder holds the current settings of a process, replaced as a
// whole when they change. Safe for concurrent use; the zero value holds the
// defaults.
type SettingsHolder struct {
	p atomic.Pointer[Settings]
}

// Get returns the current settings.
func (h *SettingsHolder) Get() Settings {
	if s := h.p.Load(); s != nil {
		return *s
	}
	return DefaultSettings()
}

// Set replaces the current settings.
func (h *SettingsHolder) Set(s Settings) { h.p.Store(&s) }

// SettingChange is one recorded change of a setting.
type SettingChange struct {
	Key       string          `json:"key"`
	OldValue  json.RawMessage `json:"old_value"`
	NewValue  json.RawMessage `json:"new_value"`
	ChangedBy string          `json:"changed_by"`
	ChangedAt time.Time       `json:"changed_at"`
}

// PlainEmail reports whether e is a bare email address (no display name).
func PlainEmail(e string) bool {
	a, err := mail.ParseAddress(e)
	return err == nil && a.Name == "" && jobs.CleanText(e) && len(e) <= 254
}
