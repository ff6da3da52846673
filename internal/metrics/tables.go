package metrics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flinthq/flint/internal/domain"
)

// TableSource reads PostgreSQL's statistics of Flint's hot tables.
type TableSource func(ctx context.Context) ([]domain.TableHealth, error)

// tableCacheTTL is how long one reading of the table statistics serves
// scrapes.
const tableCacheTTL = 10 * time.Second

// SetTableSource sets the callback read (at most every 10 s) for the
// PostgreSQL table series: flint_pg_table_live_tuples,
// flint_pg_table_dead_tuples, flint_pg_table_last_vacuum_timestamp_seconds
// and flint_pg_table_last_analyze_timestamp_seconds (by "manual", which
// includes Flint's Vacuumer, or "auto"; absent until one ran) and
// flint_pg_table_vacuums_total, all labelled by table. The series appear
// with the first call; later calls replace the callback.
func (m *Metrics) SetTableSource(src TableSource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tables == nil {
		m.tables = newTableCollector()
		m.reg.MustRegister(m.tables)
	}
	m.tables.src.Store(&src)
}

type tableCollector struct {
	live, dead, vacuumed, analyzed, vacuums *prometheus.Desc
	src                                     atomic.Pointer[TableSource]

	mu     sync.Mutex // held while the source runs
	readAt time.Time
	tables []domain.TableHealth
}

func newTableCollector() *tableCollector {
	return &tableCollector{
		live: prometheus.NewDesc("flint_pg_table_live_tuples",
			"Live row versions of the table, as PostgreSQL's statistics (pg_stat_user_tables.n_live_tup) estimate them.", []string{"table"}, nil),
		dead: prometheus.NewDesc("flint_pg_table_dead_tuples",
			"Dead row versions of the table that no VACUUM has removed yet (pg_stat_user_tables.n_dead_tup); claims slow down as they pile up in jobs.", []string{"table"}, nil),
		vacuumed: prometheus.NewDesc("flint_pg_table_last_vacuum_timestamp_seconds",
			"When the table was last vacuumed, by a client (manual: Flint's Vacuumer or an operator) or by autovacuum (auto).", []string{"table", "by"}, nil),
		analyzed: prometheus.NewDesc("flint_pg_table_last_analyze_timestamp_seconds",
			"When the table's planner statistics were last refreshed, by a client (manual) or by autovacuum (auto).", []string{"table", "by"}, nil),
		vacuums: prometheus.NewDesc("flint_pg_table_vacuums_total",
			"VACUUMs of the table since PostgreSQL's statistics were last reset, by a client (manual) or by autovacuum (auto).", []string{"table", "by"}, nil),
	}
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.live, c.dead, c.vacuumed, c.analyzed, c.vacuums} {
		ch <- d
	}
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(h.LiveTuples), h.Table)
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(h.DeadTuples), h.Table)
		for _, t := range []struct {
			desc *prometheus.Desc
			at   *time.Time
			by   string
		}{
			{c.vacuumed, h.LastVacuum, "manual"}, {c.vacuumed, h.LastAutovacuum, "auto"},
			{c.analyzed, h.LastAnalyze, "manual"}, {c.analyzed, h.LastAutoanalyze, "auto"},
		} {
			if t.at != nil {
				ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, float64(t.at.UnixNano())/1e9, h.Table, t.by)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.vacuums, prometheus.CounterValue, float64(h.Vacuums), h.Table, "manual")
		ch <- prometheus.MustNewConstMetric(c.vacuums, prometheus.CounterValue, float64(h.Autovacuums), h.Table, "auto")
	}
}

// read returns the cached statistics, reading them again when older than
// the TTL; nil after a failed read.
func (c *tableCollector) read() []domain.TableHealth {
	src := c.src.Load()
	if src == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.readAt) < tableCacheTTL {
		return c.tables
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	tables, err := (*src)(ctx)
	if err != nil {
		slog.Default().Warn("metrics: reading table statistics failed; flint_pg_table series left out of this scrape",
			"component", "metrics", "error", err)
		tables = nil
	}
	c.readAt, c.tables = time.Now(), tables
	return tables
}
