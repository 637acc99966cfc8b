package scheduler

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestResetDead is `jobsched retry`: it deletes the last Job of the dead tasks it is given (or of all with
// allDead), in key order, each under its UID; a key that is not a dead task (running, in backoff, unknown) deletes
// nothing and is named; a dry run deletes nothing and says what it would.
func TestResetDead(t *testing.T) {
	objects := func() *testkit.Fake {
		return testkit.NewFake(
			makeJob("d").Attempt(3).Finished(batchv1.JobFailed, ago(time.Minute)).Obj(),    // 3 of 3 failed: dead
			makeJob("c").Attempt(3).Finished(batchv1.JobFailed, ago(time.Hour)).Obj(),      // dead
			makeJob("b").Attempt(1).Finished(batchv1.JobFailed, ago(10*time.Second)).Obj(), // in backoff
			makeJob("r").Obj(), // running
		)
	}
	del := func(key string) string {
		return "delete jobs " + render.AttemptName("reports", key, 3) + " Background uid=uid-" + key + "-3"
	}
	for _, tc := range []struct {
		name        string
		keys        []string
		allDead     bool
		dryRun      bool
		wantRecords []string
		wantDeletes []string
		wantNotDead []string
	}{
		{name: "one dead task", keys: []string{"d"}, wantRecords: []string{"d"}, wantDeletes: []string{del("d")}},
		{name: "all dead, in key order", allDead: true, wantRecords: []string{"c", "d"}, wantDeletes: []string{del("c"), del("d")}},
		{name: "keys in any order come out in key order", keys: []string{"d", "c"}, wantRecords: []string{"c", "d"},
			wantDeletes: []string{del("c"), del("d")}},
		{name: "a running, a backing-off and an unknown key: nothing deleted", keys: []string{"d", "r", "b", "x"},
			wantNotDead: []string{"r", "b", "x"}},
		{name: "one key not dead: nothing deleted", keys: []string{"d", "r"}, wantNotDead: []string{"r"}},
		{name: "dry run", keys: []string{"d"}, dryRun: true, wantRecords: []string{"d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := objects()
			s := &Scheduler{workers: 1, Config: testConfig(t, nil), Kube: client, Now: func() time.Time { return now }}
			records, err := s.ResetDead(t.Context(), tc.keys, tc.allDead, tc.dryRun)
			var notDead *NotDeadError
			if tc.wantNotDead != nil {
				if !errors.As(err, &notDead) || !reflect.DeepEqual(notDead.Keys, tc.wantNotDead) {
					t.Errorf("err = %v, want NotDeadError for %q", err, tc.wantNotDead)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range records {
				if r.Attempt != 3 || r.State != StateDead {
					t.Errorf("record %s: attempt %d, state %s; want the dead attempt 3", r.Name, r.Attempt, r.State)
				}
				keys = append(keys, r.Key)
			}
			if !reflect.DeepEqual(keys, tc.wantRecords) {
				t.Errorf("records %q, want %q", keys, tc.wantRecords)
			}
			var deletes []string
			for _, a := range actions(client) {
				if a != "list jobs" {
					deletes = append(deletes, a)
				}
			}
			if !reflect.DeepEqual(deletes, tc.wantDeletes) {
				t.Errorf("writes %q, want %q", deletes, tc.wantDeletes)
			}
		})
	}
}

// TestResetDeadQueues: a key dead in two queues has a record in each, both deleted, in queue order; a delete that
// fails is the command's error, and the other records are still deleted.
func TestResetDeadQueues(t *testing.T) {
	cfg := queuesConfig(t, "maxPerTick: 10", queue("b", "  retry: {maxAttempts: 1}\n")+queue("a", "  retry: {maxAttempts: 1}\n"))
	var objects []runtime.Object
	for _, qi := range []int{0, 1} {
		for _, key := range []string{"k", "m"} {
			j := queueJob(t, cfg, qi, key)
			j.UID = types.UID(fmt.Sprintf("uid-%d-%s", qi, key))
			j.Status = batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}
			objects = append(objects, j)
		}
	}
	client := testkit.NewFake(objects...)
	failing := queueJob(t, cfg, 1, "m").Name
	client.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() == failing {
			return true, nil, errors.New("the API server refused")
		}
		return false, nil, nil
	})
	s := &Scheduler{workers: 1, Config: cfg, Kube: client, Now: func() time.Time { return now }}
	records, err := s.ResetDead(t.Context(), []string{"k", "m"}, false, false)
	if err == nil || !strings.Contains(err.Error(), "the API server refused") {
		t.Errorf("err = %v, want the failed delete's", err)
	}
	var got []string
	for _, r := range records {
		got = append(got, r.Key+"/"+r.Queue)
	}
	if want := []string{"k/a", "k/b", "m/a", "m/b"}; !slices.Equal(got, want) {
		t.Errorf("records %q, want %q (by key, then queue)", got, want)
	}
	deleted := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			deleted++
		}
	}
	if deleted != 4 {
		t.Errorf("%d deletes tried, want all 4 (one failing)", deleted)
	}
}
