package scheduler

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/jobmeta"
	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/rate"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestOutcomesBesideThePlan: on one state, the plan a dry run makes is what the tick after it writes, create by
// create and whole, but for what only making a create tells; the dry run says it cannot know that (Plan.NotKnown),
// and the tick records what came of each create (Result.Outcomes) and counts its summary from that record: a name
// another scheduler's Job holds (the row skipped), and a rate reservation the Lease refuses (nothing created). (The
// same on the local cluster, through the binary: e2e's TestDryRunIsWhatTickDoes.)
func TestOutcomesBesideThePlan(t *testing.T) {
	foreign := makeJob("b").Obj() // holds the name this scheduler gives task b's Job
	foreign.Labels[jobmeta.LabelScheduler] = "another"
	tests := []struct {
		name    string
		rate    bool // limits.rate, and the Lease refuses every update (the reservation)
		objects []runtime.Object
		want    map[string]OutcomeResult // each planned Job → what came of it
	}{
		{name: "every planned Job created",
			want: map[string]OutcomeResult{name("a"): OutcomeCreated, name("b"): OutcomeCreated, name("c"): OutcomeCreated}},
		{name: "a name another scheduler's Job holds: planned, and skipped by the tick", objects: []runtime.Object{foreign},
			want: map[string]OutcomeResult{name("a"): OutcomeCreated, name("b"): OutcomeNameTaken, name("c"): OutcomeCreated}},
		{name: "a rate reservation the Lease refuses: planned, and none created", rate: true,
			want: map[string]OutcomeResult{name("a"): OutcomeReservationRefused, name("b"): OutcomeReservationRefused,
				name("c"): OutcomeReservationRefused}},
	}
	notKnown := map[OutcomeResult]string{OutcomeNameTaken: NotKnownName, OutcomeReservationRefused: NotKnownRate}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				if tc.rate {
					c.Limits.Rate = rateOf(10, time.Minute)
				}
			})
			pass := func(mode Action) (Result, *testkit.Fake) {
				var objects []runtime.Object
				for _, o := range tc.objects {
					objects = append(objects, o.DeepCopyObject())
				}
				client := testkit.NewFake(objects...)
				s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b", "c")},
					Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
				if tc.rate {
					client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), lease.Name(cfg.Name), errors.New("refused by a policy"))
					})
					s.Guard = &lease.Guard{Client: client.CoordinationV1(), Namespace: cfg.Namespace, Scheduler: cfg.Name, Holder: "me", Annotation: rate.Annotation}
				}
				res, _ := s.Run(context.Background(), mode) // a refused reservation fails the pass: its summary says how
				return res, client
			}
			dry, _ := pass(DryRun)
			tick, client := pass(Execute)

			var planned []string
			for _, c := range dry.Plan.Creates {
				planned = append(planned, c.Job.Name)
			}
			if want := slices.Sorted(maps.Keys(tc.want)); !cmp.Equal(planned, want) {
				t.Fatalf("dry-run planned %v, want %v", planned, want)
			}
			kinds := []string{NotKnownName}
			if tc.rate {
				kinds = append(kinds, NotKnownRate)
			}
			if diff := cmp.Diff(kinds, dry.Plan.NotKnown()); diff != "" {
				t.Errorf("what the dry run says it cannot know (-want +got):\n%s", diff)
			}
			// The tick's writes: each planned Job created as planned, or not created for a reason the dry run named.
			got := map[string]OutcomeResult{}
			for i, o := range tick.Outcomes {
				got[o.Job] = o.Result
				c := dry.Plan.Creates[i]
				made, err := client.BatchV1().Jobs(cfg.Namespace).Get(context.Background(), c.Job.Name, metav1.GetOptions{})
				mine := err == nil && made.Labels[jobmeta.LabelScheduler] == cfg.Name
				switch {
				case o.Job != c.Job.Name || o.Key != c.Key:
					t.Errorf("outcome %d is of %s (task %q); the plan's create %d is %s (task %q)", i, o.Job, o.Key, i, c.Job.Name, c.Key)
				case o.Result == OutcomeCreated && (!mine || !equality.Semantic.DeepEqual(made.Spec, c.Job.Spec) ||
					!equality.Semantic.DeepEqual(made.Labels, c.Job.Labels) || !equality.Semantic.DeepEqual(made.Annotations, c.Job.Annotations)):
					t.Errorf("%s: created, but the Job made is not the planned one", c.Job.Name)
				case o.Result != OutcomeCreated && mine:
					t.Errorf("%s: %s, but a Job of this scheduler was made", c.Job.Name, o.Result)
				case o.Result != OutcomeCreated && !slices.Contains(dry.Plan.NotKnown(), notKnown[o.Result]):
					t.Errorf("%s: %s (%s), which the dry run did not say it cannot know: %v", c.Job.Name, o.Result, o.Reason, dry.Plan.NotKnown())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			for _, a := range actions(client) {
				if job, ok := strings.CutPrefix(a, "create jobs "); ok && tc.want[job] == "" {
					t.Errorf("the tick tried %q, which the dry run did not plan", a)
				}
			}
			count := map[OutcomeResult]int{}
			for _, r := range got {
				count[r]++
			}
			sum := tick.Summary
			if sum.Created != count[OutcomeCreated] || sum.Skipped != len(tick.Plan.Skipped)+count[OutcomeNameTaken] ||
				sum.NotCreated != count[OutcomeReservationRefused] {
				t.Errorf("summary %+v; outcomes %v, plan skips %d", sum, count, len(tick.Plan.Skipped))
			}
		})
	}
}
