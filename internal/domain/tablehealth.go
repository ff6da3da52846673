package domain

import "time"

// TableHealth is PostgreSQL's own account of one of Flint's tables
// (pg_stat_user_tables): how many row versions are live and dead, and
// when VACUUM and ANALYZE last ran on it, by hand (Flint's maintenance
// included) or by autovacuum. A queue table turns over all its rows many
// times a day; dead versions that nothing removes slow every claim down.
type TableHealth struct {
	Table           string
	LiveTuples      int64
	DeadTuples      int64
	LastVacuum      *time.Time // VACUUM run by a client (Flint's Vacuumer, an operator)
	LastAutovacuum  *time.Time
	LastAnalyze     *time.Time
	LastAutoanalyze *time.Time
	Vacuums         int64 // VACUUMs by clients since the statistics were reset
	Autovacuums     int64
}

// LastVacuumed is the later of the table's last VACUUM and autovacuum,
// nil when neither ever ran.
func (h TableHealth) LastVacuumed() *time.Time {
	switch {
	case h.LastVacuum == nil:
		return h.LastAutovacuum
	case h.LastAutovacuum == nil || h.LastVacuum.After(*h.LastAutovacuum):
		return h.LastVacuum
	default:
		return h.LastAutovacuum
	}
}
