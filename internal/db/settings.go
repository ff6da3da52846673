package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

// ChannelSettings carries a notification whenever a setting changes, so
// every process reloads at once.
const ChannelSettings = "flint_settings"

const settingsSQL = `SELECT key, value FROM settings`

// GetSettings returns the stored settings over the defaults. Stored values
// that no longer parse or validate are ignored (and the default used), so a
// bad row can never stop a process.
func (s *Store) GetSettings(ctx context.Context) (domain.Settings, error) {
	return getSettings(ctx, s.pool)
}

func getSettings(ctx context.Context, q DBTX) (domain.Settings, error) {
	out := domain.DefaultSettings()
	rows, err := q.Query(ctx, settingsSQL)
	if err != nil {
		return out, fmt.Errorf("read settings: %w", err)
	}
	stored := map[string]json.RawMessage{}
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return out, fmt.Errorf("read settings: %w", err)
		}
		stored[k] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read settings: %w", err)
	}
	known := out.Map()
	for k, v := range stored {
		if _, ok := known[k]; !ok {
			continue
		}
		if next, _, err := out.Patch(map[string]json.RawMessage{k: v}); err == nil {
			out = next
		}
	}
	return out, nil
}

const upsertSettingSQL = `
INSERT INTO settings (key, value, updated_at, updated_by) VALUES ($1, $2, now(), $3)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now(), updated_by = excluded.updated_by`

const recordSettingChangeSQL = `
INSERT INTO settings_changes (key, old_value, new_value, changed_by) VALUES ($1, $2, $3, $4)`

// lockSettingsSQL serialises settings updates for the rest of the
// transaction.
const lockSettingsSQL = `SELECT pg_advisory_xact_lock(7283947)`

const notifySettingsSQL = `SELECT pg_notify($1, '')`

// UpdateSettings applies a partial update (validated against the current
// settings), records each change with who made it, and notifies every
// process. Concurrent updates serialise on a lock so each validates against
// the latest values.
func (s *Store) UpdateSettings(ctx context.Context, patch map[string]json.RawMessage, by string) (domain.Settings, []string, error) {
	var next domain.Settings
	var changed []string
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSettingsSQL); err != nil {
			return err
		}
		cur, err := getSettings(ctx, tx)
		if err != nil {
			return err
		}
		next, changed, err = cur.Patch(patch)
		if err != nil {
			return err
		}
		before, after := cur.Map(), next.Map()
		for _, k := range changed {
			if _, err := tx.Exec(ctx, upsertSettingSQL, k, string(after[k]), by); err != nil {
				return fmt.Errorf("update settings: %w", err)
			}
			if _, err := tx.Exec(ctx, recordSettingChangeSQL, k, string(before[k]), string(after[k]), by); err != nil {
				return fmt.Errorf("update settings: %w", err)
			}
		}
		if len(changed) > 0 {
			if _, err := tx.Exec(ctx, notifySettingsSQL, ChannelSettings); err != nil {
				return fmt.Errorf("update settings: %w", err)
			}
		}
		return nil
	})
	return next, changed, err
}

const settingsChangesSQL = `
SELECT key, old_value, new_value, changed_by, changed_at FROM settings_changes ORDER BY id DESC LIMIT $1`

// ListSettingsChanges returns the most recent changes first.
func (s *Store) ListSettingsChanges(ctx context.Context, limit int) ([]domain.SettingChange, error) {
	var rows []struct {
		Key       string    `db:"key"`
		OldValue  []byte    `db:"old_value"`
		NewValue  []byte    `db:"new_value"`
		ChangedBy string    `db:"changed_by"`
		ChangedAt time.Time `db:"changed_at"`
	}
	if err := s.sqlx.SelectContext(ctx, &rows, settingsChangesSQL, limit); err != nil {
		return nil, fmt.Errorf("list settings changes: %w", err)
	}
	out := make([]domain.SettingChange, len(rows))
	for i, r := range rows {
		out[i] = domain.SettingChange{Key: r.Key, OldValue: r.OldValue, NewValue: r.NewValue, ChangedBy: r.ChangedBy, ChangedAt: r.ChangedAt}
	}
	return out, nil
}
