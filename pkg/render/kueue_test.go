package render

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"

	_ "github.com/jobsched/jobsched/pkg/capacity/kueue" // the mode whose labels these are
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/kueue"
	"github.com/jobsched/jobsched/pkg/rows"
)

// TestJobKueue: with limits.capacity: kueue each Job carries the LocalQueue's label and, when one is given, its
// WorkloadPriorityClass; the rest of the Job is exactly what the other modes render.
func TestJobKueue(t *testing.T) {
	row := func(prio *string) rows.Row {
		r := rows.Row{Key: "42", Columns: []rows.Column{{Name: "id", Value: "42"}}}
		if prio != nil {
			r.Columns = append(r.Columns, rows.Column{Name: "prio", Value: *prio, Null: *prio == "NULL"})
		}
		return r
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		kueue  config.Kueue
		row    rows.Row
		labels map[string]string // the Kueue labels the Job gets on top of the others
	}{
		{"queue only", config.Kueue{LocalQueue: "team-a"}, row(nil), map[string]string{kueue.QueueLabel: "team-a"}},
		{"priority class", config.Kueue{LocalQueue: "team-a", PriorityClass: "low"}, row(nil),
			map[string]string{kueue.QueueLabel: "team-a", kueue.PriorityLabel: "low"}},
		{"the row's priority wins", config.Kueue{LocalQueue: "team-a", PriorityClass: "low", PriorityColumn: "prio"}, row(str("high")),
			map[string]string{kueue.QueueLabel: "team-a", kueue.PriorityLabel: "high"}},
		{"a NULL priority falls back", config.Kueue{LocalQueue: "team-a", PriorityClass: "low", PriorityColumn: "prio"}, row(str("NULL")),
			map[string]string{kueue.QueueLabel: "team-a", kueue.PriorityLabel: "low"}},
		{"the priority column first", config.Kueue{LocalQueue: "team-a", PriorityClass: "low", PriorityColumn: "prio"},
			rows.Row{Key: "42", Columns: []rows.Column{{Name: "prio", Value: "high"}, {Name: "id", Value: "42"}}},
			map[string]string{kueue.QueueLabel: "team-a", kueue.PriorityLabel: "high"}},
		{"an empty priority and no class", config.Kueue{LocalQueue: "team-a", PriorityColumn: "prio"}, row(str("")),
			map[string]string{kueue.QueueLabel: "team-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plain := testConfig()
			want, err := New(plain, nil).Job(tc.row, 2)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.labels {
				want.Labels[k] = v
			}
			cfg := testConfig()
			cfg.Limits.Capacity, cfg.Kueue = config.CapacityKueue, &tc.kueue
			got, err := New(cfg, nil).Job(tc.row, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("Job differs (-got +want):\n%s", cmp.Diff(got, want))
			}
		})
	}
}

func TestJobKueueErrors(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.Capacity, cfg.Kueue = config.CapacityKueue, &config.Kueue{LocalQueue: "q", PriorityColumn: "prio"}
	r := New(cfg, nil)

	_, err := r.Job(rows.Row{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}, {Name: "prio", Value: "Not A Class"}}}, 1)
	var rowErr *RowError
	if !errors.As(err, &rowErr) || rowErr.Key != "1" {
		t.Errorf("a priority that is no class name: %v, want a RowError for key 1 (the row is skipped, not the pass)", err)
	}
	_, err = r.Job(rows.Row{Key: "1", Columns: []rows.Column{{Name: "id", Value: "1"}}}, 1)
	if !config.IsConfigError(err) {
		t.Errorf("no priority column: %v, want a config error (every row would have it)", err)
	}
}
