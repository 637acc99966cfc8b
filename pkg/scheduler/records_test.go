package scheduler

import (
	"errors"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/jobsched/jobsched/pkg/render"
)

// TestResetDead is `jobsched retry`: it deletes the last Job of the dead tasks it is given (or of all with
// allDead), in key order, each under its UID; a key that is not a dead task (running, in backoff, unknown) deletes
// nothing and is named; a dry run deletes nothing and says what it would.
func TestResetDead(t *testing.T) {
	objects := func() *fake.Clientset {
		return fake.NewClientset(
			attempt("d", 3, batchv1.JobFailed, time.Minute, ""),    // 3 of 3 failed: dead
			attempt("c", 3, batchv1.JobFailed, time.Hour, ""),      // dead
			attempt("b", 1, batchv1.JobFailed, 10*time.Second, ""), // in backoff
			job("r", "", 0), // running
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
