// Package grafana checks the Grafana dashboard beside it (ddiskqos.json)
// with Prometheus's own PromQL parser. It is a module of its own so that
// github.com/prometheus/prometheus and its dependencies stay out of the
// daemon's go.mod: `make test` runs it (`go test ./...` at the top does
// not enter nested modules).
//
// What the parser finds is kept in metrics.txt, the metric names the
// dashboard queries, one a line. TestDashboardMetricsFile fails while
// that file differs from the dashboard (go test -update rewrites it), and
// cmd/ddiskqos's TestRealMetricsPromtoolAndDashboard checks that the real
// daemon exports every name in it.
package grafana

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	dashboardPath = "ddiskqos.json"
	namesPath     = "metrics.txt"
)

var update = flag.Bool("update", false, "rewrite "+namesPath+" from the dashboard")

// namesHeader opens metrics.txt.
const namesHeader = `# The metric names deploy/grafana/ddiskqos.json queries, one a line, as
# Prometheus's PromQL parser finds them. Generated: cd deploy/grafana &&
# go test -update. cmd/ddiskqos's real /metrics test checks that the daemon
# exports each.
`

// TestDashboardMetricsFile parses the repository's dashboard: every
// expression must parse, name only the daemon's metrics (ddiskqos_ and the
// process collector's), and the names must be those metrics.txt lists.
func TestDashboardMetricsFile(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	names, err := promqlMetricNames(b)
	if err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if len(names) == 0 {
		t.Fatalf("%s queries no metric", dashboardPath)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "ddiskqos_") && !strings.HasPrefix(n, "process_") {
			t.Errorf("%s queries %s: not a metric of the daemon", dashboardPath, n)
		}
	}
	want := namesHeader + strings.Join(names, "\n") + "\n"
	if *update {
		if err := os.WriteFile(namesPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(namesPath)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if string(got) != want {
		t.Errorf("%s is not what %s queries (go test -update to rewrite it):\n got %q\nwant %q", namesPath, dashboardPath, got, want)
	}
}

// grafanaVars are Grafana's built-in interval variables, which PromQL
// cannot parse, and what stands for them while parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

// labelValues is a template variable's query: label_values(EXPR, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

type grafanaPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

// promqlMetricNames returns, sorted, the metric names of every PromQL
// expression in a dashboard: the panels' targets (nested rows included)
// and the template variables' queries. An expression PromQL cannot parse,
// or one that selects no metric by name, is an error naming the panel.
func promqlMetricNames(dashboard []byte) ([]string, error) {
	var d struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("not a dashboard: %w", err)
	}
	type expr struct{ where, text string }
	var exprs []expr
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs = append(exprs, expr{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		var qo struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			if err := json.Unmarshal(v.Query, &qo); err != nil {
				return nil, fmt.Errorf("variable %s: query %s: %w", v.Name, v.Query, err)
			}
			q = qo.Query
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(EXPR, label)", v.Name, q)
		}
		exprs = append(exprs, expr{"variable " + v.Name, m[1]})
	}
	p := parser.NewParser(parser.Options{})
	seen := map[string]bool{}
	for _, e := range exprs {
		if strings.TrimSpace(e.text) == "" {
			return nil, fmt.Errorf("%s: empty expression", e.where)
		}
		ast, err := p.ParseExpr(grafanaVars.Replace(e.text))
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", e.where, e.text, err)
		}
		found := false
		parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				name := vs.Name
				if name == "" { // {__name__="x"}
					for _, m := range vs.LabelMatchers {
						if m.Name == model.MetricNameLabel {
							name = m.Value
						}
					}
				}
				if name != "" {
					seen[name], found = true, true
				}
			}
			return nil
		})
		if !found {
			return nil, fmt.Errorf("%s: %q selects no metric by name", e.where, e.text)
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// TestDashboardMetricNames: the extraction itself, on a small dashboard
// with a nested row, a variable and Grafana's interval variable; and the
// errors a broken dashboard gets.
func TestDashboardMetricNames(t *testing.T) {
	t.Parallel()
	got, err := promqlMetricNames([]byte(`{"panels": [
	  {"title": "a", "targets": [{"refId": "A", "expr": "sum by (device) (rate(x_total{device=~\"$device\"}[$__rate_interval])) / on() group_left y"}]},
	  {"title": "row", "type": "row", "panels": [{"title": "b", "targets": [{"refId": "A", "expr": "histogram_quantile(0.9, rate(h_bucket[5m])) and {__name__=\"z\"}"}]}]}],
	 "templating": {"list": [{"name": "device", "type": "query", "query": {"query": "label_values(w_info{job=\"j\"}, device)"}},
	   {"name": "ds", "type": "datasource", "query": "prometheus"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"h_bucket", "w_info", "x_total", "y", "z"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	for _, bad := range []string{
		`{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": "rate(x[5m]"}]}]}`,
		`{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": ""}]}]}`,
		`{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": "1 + 1"}]}]}`,
		`{"templating": {"list": [{"name": "v", "type": "query", "query": "up"}]}}`,
		`{"panels": 3}`,
	} {
		if _, err := promqlMetricNames([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
