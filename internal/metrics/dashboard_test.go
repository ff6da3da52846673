package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The Grafana dashboard in deploy/grafana must only ask for what Flint
// exports: every query parses as PromQL, names a metric family this
// package registers, and filters and groups only by labels that family
// has.

// grafanaVars stand in for the variables Grafana fills into a query
// before Prometheus sees it.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// exportedFamilies scrapes metrics with every source set and every family
// observed once, and returns each family's label names by series name
// (a histogram's _bucket, _sum and _count series included).
func exportedFamilies(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := New("test")
	m.SetStateSource(func(context.Context) (map[[2]string]int64, error) {
		return map[[2]string]int64{{"queued", "default"}: 1}, nil
	})
	m.SetRedisState(func() string { return "ok" })
	m.SetEventCounters(func() uint64 { return 1 }, func() uint64 { return 0 })
	m.SetPoolState(func() int { return 1 }, func() int { return 4 })
	now := time.Now()
	m.SetTableSource(func(context.Context) ([]domain.TableHealth, error) {
		return []domain.TableHealth{{Table: "jobs", LiveTuples: 1, DeadTuples: 1, LastVacuum: &now, LastAnalyze: &now, Vacuums: 1}}, nil
	})
	events, _ := realisticEvents()
	m.ObserveEvents(events)
	m.ObserveRun("noop", domain.OutcomeSucceeded, time.Millisecond)
	m.ObserveReaped([]domain.Moved{{JobID: uuid.New(), Status: jobs.StateQueued, Type: "noop", Queue: "default"}})
	m.ObservePromoted(1)

	got, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	for _, f := range got {
		names := map[string]bool{}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				names[l.GetName()] = true
			}
		}
		out[f.GetName()] = names
		if f.GetType().String() == "HISTOGRAM" {
			withLe := map[string]bool{"le": true}
			for n := range names {
				withLe[n] = true
			}
			out[f.GetName()+"_bucket"] = withLe
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = names, names
		}
	}
	return out
}

type dashboardPanel struct {
	ID         int              `json:"id"`
	Type       string           `json:"type"`
	Title      string           `json:"title"`
	Datasource *json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// labelValuesQuery is a Grafana variable query: label_values(metric, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

func TestGrafanaDashboardQueriesWhatFlintExports(t *testing.T) {
	t.Parallel()
	families := exportedFamilies(t)
	require.Contains(t, families, "flint_jobs", "the families are read")
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "flint.json"))
	require.NoError(t, err)
	var d struct {
		Title      string           `json:"title"`
		UID        string           `json:"uid"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name, Type, Definition string
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.UID)

	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s: %q", v.Name, v.Definition)
		require.True(t, families[m[1]][m[2]], "variable %s: %s has no label %s", v.Name, m[1], m[2])
	}

	ids := map[int]bool{}
	var queries int
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			require.NotNil(t, p.Datasource, "panel %q names no data source", p.Title)
			require.Contains(t, string(*p.Datasource), "${datasource}", "panel %q uses the dashboard's data source variable", p.Title)
			for _, tg := range p.Targets {
				checkQuery(t, families, p.Title, tg.Expr)
				queries++
			}
		}
	}
	walk(d.Panels)
	require.GreaterOrEqual(t, queries, 20)
}

// checkQuery parses expr as PromQL and checks each series it selects and
// each label it filters or groups by against the exported families.
func checkQuery(t *testing.T, families map[string]map[string]bool, panel, expr string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	require.NoError(t, err, "panel %q: %s", panel, expr)
	parser.Inspect(e, func(node parser.Node, path []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labelsOf, ok := families[n.Name]
			require.True(t, ok, "panel %q: Flint exports no %s (%s)", panel, n.Name, expr)
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					require.True(t, labelsOf[m.Name], "panel %q: %s has no label %s", panel, n.Name, m.Name)
				}
			}
		case *parser.AggregateExpr:
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					for _, g := range n.Grouping {
						require.True(t, families[vs.Name][g], "panel %q: %s has no label %s to group by", panel, vs.Name, g)
					}
				}
				return nil
			})
		}
		return nil
	})
}
