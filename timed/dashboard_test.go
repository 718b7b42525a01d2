package timed

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
)

// dashboardFile is the Grafana dashboard for timed's metrics.
const dashboardFile = "../deploy/grafana/timed.json"

// scrapeLabels are added by Prometheus when it scrapes, not by the daemon.
var scrapeLabels = []string{"job", "instance"}

// served is every metric family the daemon's /metrics can serve, with its
// label names: the descriptors of the registry newMetrics serves.
func served(t *testing.T) map[string][]string {
	t.Helper()
	_, reg := newRegistry(&Daemon{applier: &clocksync.Applier{}})
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	// Desc has no getters; its String is "Desc{fqName: "…", …,
	// variableLabels: {a,b}}" (a label with a constraint as c(a)).
	re := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor %s: cannot read its name and labels", d)
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(l), "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = labels
	}
	// The reading of descriptors must find what the daemon is known to
	// serve, or every check below would pass on an empty table.
	for name, labels := range map[string][]string{"timed_synchronised": nil, "timed_state": {"network", "state"},
		"timed_dropped_packets_total": {"reason"}, "process_resident_memory_bytes": nil} {
		got, ok := out[name]
		if !ok || !slices.Equal(got, labels) {
			t.Fatalf("served metrics: %s has labels %v (present: %v), want %v", name, got, ok, labels)
		}
	}
	return out
}

// grafanaVars are the dashboard's variables, replaced by values PromQL
// parses before its expressions are read.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${job}", "job", "$job", "job", "${instance}", "host", "$instance", "host")

// dashboardQueries is every PromQL expression of the dashboard (panels'
// targets, annotations) and every label_values query of its variables,
// by where it stands.
func dashboardQueries(t *testing.T) (exprs, labelValues map[string]string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs, labelValues = map[string]string{}, map[string]string{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for i, tg := range p.Targets {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %d: data source %q, want the dashboard's ${datasource}", p.Title, i, tg.Datasource.UID)
			}
			exprs["panel "+p.Title+", target "+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, a := range dash.Annotations.List {
		exprs["annotation "+a.Name] = a.Expr
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query: %v", v.Name, err)
		}
		labelValues["variable "+v.Name] = q.Query
	}
	if len(exprs) < 10 || len(labelValues) == 0 {
		t.Fatalf("%s: %d expressions and %d variable queries read: the dashboard's shape is not what this test reads", dashboardFile, len(exprs), len(labelValues))
	}
	return exprs, labelValues
}

// stateNames are the values of timed_state's state label.
func stateNames() []string {
	names := []string{"ignore"}
	for s := election.State(0); !strings.HasPrefix(s.String(), "state("); s++ {
		names = append(names, s.String())
	}
	return names
}

// checkExpr parses expr and checks every metric it selects against
// served: the name, the labels it matches on, the labels its aggregations
// group by, and the values of timed_state's state label. It returns the
// metrics selected, and what is wrong.
func checkExpr(where, expr string, metrics map[string][]string) (selected, errs []string) {
	e, err := parser.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, []string{where + ": " + err.Error()}
	}
	hasLabel := func(metric, label string) bool {
		return slices.Contains(metrics[metric], label) || slices.Contains(scrapeLabels, label) || label == "__name__"
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			selected = append(selected, n.Name)
			labels, ok := metrics[n.Name]
			if !ok {
				errs = append(errs, where+": "+n.Name+" is not among the daemon's metrics")
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name == "__name__" {
					continue
				}
				if !hasLabel(n.Name, m.Name) {
					errs = append(errs, where+": "+n.Name+" has no label "+m.Name+" (it has "+strings.Join(labels, ", ")+")")
				}
				if m.Name == "state" {
					for _, v := range strings.Split(m.Value, "|") {
						if !slices.Contains(stateNames(), v) {
							errs = append(errs, where+": no state is called "+v+" (states: "+strings.Join(stateNames(), ", ")+")")
						}
					}
				}
			}
		case *parser.AggregateExpr:
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					if _, known := metrics[vs.Name]; !known {
						return nil // said above
					}
					for _, g := range n.Grouping {
						if !hasLabel(vs.Name, g) {
							errs = append(errs, where+": grouped by "+g+", which "+vs.Name+" does not have")
						}
					}
				}
				return nil
			})
		}
		return nil
	})
	return selected, errs
}

// TestDashboardQueriesServedMetrics: every metric the Grafana dashboard
// (deploy/grafana/timed.json) queries, in panels, annotations and
// variables, is one the daemon's /metrics serves, with the labels the
// query matches on and groups by; every expression parses as PromQL. A
// metric renamed in metrics.go, or a dashboard typo, fails here rather
// than as an empty panel.
func TestDashboardQueriesServedMetrics(t *testing.T) {
	metrics := served(t)
	exprs, labelValues := dashboardQueries(t)
	queried := map[string]bool{}
	for _, where := range slices.Sorted(maps.Keys(exprs)) {
		selected, errs := checkExpr(where, exprs[where], metrics)
		for _, err := range errs {
			t.Error(err)
		}
		for _, name := range selected {
			queried[name] = true
		}
	}
	lv := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	for _, where := range slices.Sorted(maps.Keys(labelValues)) {
		m := lv.FindStringSubmatch(labelValues[where])
		if m == nil {
			t.Errorf("%s: %q is not label_values(selector, label)", where, labelValues[where])
			continue
		}
		selected, errs := checkExpr(where, m[1], metrics)
		for _, err := range errs {
			t.Error(err)
		}
		for _, name := range selected {
			if !slices.Contains(metrics[name], m[2]) && !slices.Contains(scrapeLabels, m[2]) {
				t.Errorf("%s: %s has no label %s", where, name, m[2])
			}
		}
	}
	// What the issue asks the dashboard to show: sync state and offset
	// per host, the spread, elections, drops by reason, alarms.
	for _, name := range []string{"timed_synchronised", "timed_estimated_offset_seconds", "timed_slave_offset_seconds",
		"timed_elections_total", "timed_dropped_packets_total", "timed_alarm"} {
		if !queried[name] {
			t.Errorf("the dashboard does not query %s", name)
		}
	}
}

// TestCheckExprFinds keeps the dashboard test honest: a misspelt metric,
// a label the metric lacks, a grouping by such a label and an unknown
// state are each reported.
func TestCheckExprFinds(t *testing.T) {
	metrics := served(t)
	for expr, want := range map[string]string{
		`timed_synchronized`:                                    "timed_synchronized is not among",
		`timed_alarm{network="lan"}`:                            "timed_alarm has no label network",
		`sum by (reason) (rate(timed_packets_total[5m]))`:       "grouped by reason",
		`timed_state{state="MASTER"}`:                           "no state is called MASTER",
		`sum(rate(timed_dropped_packets_total{job=~"$job"}[5m]`: "parse error",
	} {
		_, errs := checkExpr("x", expr, metrics)
		if len(errs) != 1 || !strings.Contains(errs[0], want) {
			t.Errorf("checkExpr(%s) = %q, want one error with %q", expr, errs, want)
		}
	}
	if _, errs := checkExpr("x", `sum by (instance, network) (increase(timed_elections_total{job=~"$job"}[$__rate_interval]))`, metrics); len(errs) != 0 {
		t.Errorf("a good expression: %q", errs)
	}
}
