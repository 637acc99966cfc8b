package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// With the Lease as its Guard, an Execute pass takes it before anything else (its observation decides the creates)
// and releases it after its last create; gc and dry runs never touch it.
func TestRunWithTheLease(t *testing.T) {
	for _, tc := range []struct {
		mode Action
		want []string
	}{
		{Execute, []string{
			"get leases jobsched-reports", "create leases jobsched-reports", // taken: not found, created
			"list jobs", "list pods", // the observation, after the Lease (the fake serves no streaming list)
			"create jobs " + name("a"), "create jobs " + name("b"),
			"update leases jobsched-reports", // released after the creates
		}},
		{DeleteOnly, []string{"list jobs"}},
		{DryRun, []string{"list jobs", "list pods"}},
	} {
		t.Run(map[Action]string{Execute: "tick", DeleteOnly: "gc", DryRun: "dry-run"}[tc.mode], func(t *testing.T) {
			cfg := testConfig(t, nil)
			client := testkit.NewFake()
			g := &lease.Guard{Client: client.CoordinationV1(), Namespace: cfg.Namespace, Scheduler: cfg.Name, Holder: "me"}
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a", "b")},
				Renderer: render.New(cfg, nil), Now: func() time.Time { return now }, Guard: g}
			res, err := s.Run(context.Background(), tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, actions(client)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			wantLease := ""
			if tc.mode == Execute {
				wantLease = lease.StateHeld
			}
			if res.Summary.Lease != wantLease {
				t.Errorf("summary lease %q, want %q", res.Summary.Lease, wantLease)
			}
		})
	}
}

// Held by another for the whole wait: the pass still deletes its finished Jobs, creates nothing, and says why.
func TestRunLeaseHeldByAnother(t *testing.T) {
	cfg := testConfig(t, nil)
	holder, dur := "other", int32(3600)
	client := testkit.NewFake(makeJob("done").Finished("Complete", ago(time.Hour)).Obj())
	renewed := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease.Name(cfg.Name), Namespace: cfg.Namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &renewed}}
	if _, err := client.CoordinationV1().Leases(cfg.Namespace).Create(context.Background(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	g := &lease.Guard{Client: client.CoordinationV1(), Namespace: cfg.Namespace, Scheduler: cfg.Name, Holder: "me"}
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a")},
		Renderer: render.New(cfg, nil), Now: func() time.Time { return now }, Guard: g, Timeout: 400 * time.Millisecond}
	res, err := s.Run(context.Background(), Execute)
	if err != nil {
		t.Fatal(err)
	}
	sum := res.Summary
	if sum.Created != 0 || sum.Deleted != 1 || sum.Lease != "held by other" || sum.Blocked == "" {
		t.Errorf("summary %+v: want the finished Job deleted, nothing created, blocked by the Lease", sum)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "leases" && a.GetVerb() != "get" {
			t.Errorf("the pass wrote a Lease it does not hold: %s", action(a))
		}
	}
}
