// Package testkit holds the helpers the tests of several packages share, so that each exists once. Only tests import
// it.
//
// What the unit tests of the pass (pkg/scheduler) and of the reports (pkg/report) build their cases from: a
// configuration (Config), builders of the Jobs, pods and nodes they list (MakeJob, MakePod, MakeNode, in kueue's
// style), an in-memory rows.Source, and the fake client's actions in compact form. What the tests of the commands
// read in jobsched's output (cmd, pkg/e2e): the `pass done` line (PassDone) and the errors of a JSON log (WithErrors); and a Buffer that a test reads
// while another goroutine or a process writes it (pkg/events, pkg/lease, pkg/e2e). A database host that never answers
// is in the subpackage tcpkit, which pkg/rows' own tests can import; the Job template of a kwok task pod and the
// node check in kwokkit, which the bench imports too. Pause is the one way a scenario keeps a schedule (an outage's
// length, the moment of a fault).
package testkit

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/querydoctor"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/rows"
)

// Now is the tests' clock.
var Now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Config is the scheduler Scheduler in Namespace with capacity off, changed by mutate (nil: as is).
func Config(t testing.TB, mutate func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{
		Name: Scheduler, Namespace: Namespace, File: "jobsched.yaml",
		Source: config.Source{Key: "id", Query: "q"},
		Job:    config.Job{NamePrefix: Scheduler},
		Limits: config.Limits{MaxActive: ptr.To(10), MaxPerTick: ptr.To(10), BlockOnUnschedulable: ptr.To(true), ReserveForTick: ptr.To(true), Capacity: config.CapacityOff},
		Retry: config.Retry{MaxAttempts: ptr.To(3), Backoff: &metav1.Duration{Duration: time.Minute},
			MaxBackoff: &metav1.Duration{Duration: time.Hour}},
		Template: &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "worker:1"}},
			}}},
		},
	}
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

// Name is the Job name of key's first attempt.
func Name(key string) string { return render.JobName(Scheduler, key) }

// Source is an in-memory rows.Source that records what it was asked. Cancel are the keys its cancel query returns
// (source.cancelQuery), whether or not Rows holds them; CancelCalls the keys each Cancelled was asked about.
type Source struct {
	Rows        []rows.Row
	Calls       [][]string // the exclude list of each Select
	Cancel      []string
	CancelCalls [][]string
}

func (s *Source) Select(_ context.Context, sel rows.Selection) ([]rows.Row, error) {
	s.Calls = append(s.Calls, append([]string(nil), sel.Exclude...))
	var out []rows.Row
	for _, r := range s.Rows {
		if len(out) < sel.Limit && !slices.Contains(sel.Exclude, r.Key) {
			r.Cancelled = slices.Contains(s.Cancel, r.Key)
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Source) Cancelled(_ context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	s.CancelCalls = append(s.CancelCalls, slices.Clone(keys))
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k) && slices.Contains(s.Cancel, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *Source) Count(ctx context.Context, exclude []string, max int) (int, error) {
	got, err := s.Select(ctx, rows.Selection{Exclude: exclude, Limit: max})
	return len(got), err
}

func (s *Source) Selected(_ context.Context, keys []string) ([]string, error) {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k) && slices.ContainsFunc(s.Rows, func(r rows.Row) bool { return r.Key == k }) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *Source) Ping(context.Context) error { return nil }

func (s *Source) Lookup(_ context.Context, keys []string) ([]rows.Row, error) {
	var out []rows.Row
	for _, r := range s.Rows {
		if slices.Contains(keys, r.Key) {
			out = append(out, r)
		}
	}
	return out, nil
}

// RowsFor is one row per key, with the key as its only column, id.
func RowsFor(keys ...string) []rows.Row {
	var out []rows.Row
	for _, k := range keys {
		out = append(out, rows.Row{Key: k, Columns: []rows.Column{{Name: "id", Value: k}}})
	}
	return out
}

// Actions are the client's actions in compact form, in the order they were made: the order is part of what a test
// of the pass pins (it runs the pass with one worker, so its writes are in plan order too).
func Actions(client interface{ Actions() []k8stesting.Action }) []string {
	var got []string
	for _, a := range client.Actions() {
		got = append(got, Action(a))
	}
	return got
}

// Action is a compact form of a client action: "list jobs", "create jobs reports-x-…", "delete jobs …".
func Action(a k8stesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	switch a := a.(type) {
	case k8stesting.CreateAction:
		s += " " + a.GetObject().(metav1.Object).GetName()
	case k8stesting.DeleteAction:
		s += " " + a.GetName()
		if pp := a.GetDeleteOptions().PropagationPolicy; pp != nil {
			s += " " + string(*pp)
		}
		if pc := a.GetDeleteOptions().Preconditions; pc != nil && pc.UID != nil {
			s += " uid=" + string(*pc.UID)
		}
	case k8stesting.GetAction:
		s += " " + a.GetName()
	}
	return s
}

// DoctorSource is a Source with a query doctor that records what it was asked to explain.
type DoctorSource struct {
	Source
	Finding *querydoctor.Finding
	Exclude []string
	Limit   int
}

func (d *DoctorSource) Explain(_ context.Context, exclude []string, limit int) *querydoctor.Finding {
	d.Exclude, d.Limit = exclude, limit
	return d.Finding
}
