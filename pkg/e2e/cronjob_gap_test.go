//go:build integration

package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// cronRun is one run of the CronJob as a watch of its Jobs saw it: when the Job appeared and ended (the test's
// clock), and the time it was scheduled for (the CronJob controller's annotation).
type cronRun struct {
	name              string
	scheduled         time.Time
	created, finished time.Time
}

// TestCronJobGaps measures, under the real CronJob controller of the local control plane, the gaps between the runs
// of the shipped CronJob (manifests/base/cronjob.yaml: its concurrencyPolicy, deadlines and pod), where a run lasts as
// its --fill-for says. kwok runs no container, so jobsched does not run in the pod: kwok ends the pod after the
// duration of its annotation, which stands for a run that covers its --fill-for (source.notify or source.poll) and a
// last pass of a second. The cron granularity is a minute, so the schedule is scaled from */3 to every minute with
// the same margin: a run lasts the minute less (period − --fill-for) + 1 s. The model it checks:
//
//   - a run that ends before the next one's time: the next starts at its time; the gap is that margin less the last
//     pass, plus the controller's and the pod's start;
//   - a run that overruns (here the second, by 30 s, as a slow last pass or a slow database would): Forbid holds the
//     next one back, and the controller starts it when the Job ends (within startingDeadlineSeconds), not skipped.
//
// The gaps are logged (a measurement, not asserted); what is asserted: three runs in a row, never two at once,
// scheduled one minute apart (none skipped), the one after the overrun started after its time.
func TestCronJobGaps(t *testing.T) {
	t.Parallel()
	e := newNodeEnv(t, "2", "4Gi")
	shipped := shippedCronJob(t)
	margin := cronPeriod(t, shipped) - cronFlag(t, shipped, "--fill-for")
	run := time.Minute - margin + time.Second
	overrun := time.Minute + 30*time.Second

	cj := shipped.DeepCopy()
	cj.Namespace = e.ns
	cj.Spec.Schedule = "* * * * *"
	pod := &cj.Spec.JobTemplate.Spec.Template
	pod.Annotations = map[string]string{"jobsched.io/kwok-duration": run.String()}
	pod.Spec.NodeSelector = map[string]string{"jobsched.io/e2e-pool": e.pool}
	pod.Spec.ServiceAccountName = "default"

	var mu sync.Mutex
	runs := map[string]*cronRun{}
	running := 0
	var overlapped []string
	e.followJobs(func(ev watch.Event) {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok || ev.Type == watch.Bookmark || j.Annotations[scheduledAt] == "" { // only the CronJob's Jobs
			return
		}
		mu.Lock()
		defer mu.Unlock()
		r := runs[j.Name]
		if r == nil {
			ts, err := time.Parse(time.RFC3339, j.Annotations[scheduledAt])
			if err != nil {
				t.Errorf("Job %s: scheduled timestamp: %v", j.Name, err)
			}
			r = &cronRun{name: j.Name, scheduled: ts, created: time.Now()}
			runs[j.Name] = r
			if running++; running > 1 {
				overlapped = append(overlapped, j.Name)
			}
		}
		if r.finished.IsZero() && finishedJob(j) {
			r.finished = time.Now()
			running--
		}
	})
	if _, err := e.kube.BatchV1().CronJobs(e.ns).Create(e.ctx, cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sorted := func() []*cronRun {
		mu.Lock()
		defer mu.Unlock()
		var out []*cronRun
		for _, r := range runs {
			c := *r
			out = append(out, &c)
		}
		slices.SortFunc(out, func(a, b *cronRun) int { return a.scheduled.Compare(b.scheduled) })
		return out
	}
	setDuration := func(d time.Duration) {
		patch := fmt.Sprintf(`{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"jobsched.io/kwok-duration":%q}}}}}}}`, d)
		if _, err := e.kube.BatchV1().CronJobs(e.ns).Patch(e.ctx, cj.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Run 1 lasts run; run 2 overruns its minute; run 3 lasts run again.
	e.eventually("the first run", 2*time.Minute, func() bool { return len(sorted()) >= 1 })
	setDuration(overrun)
	e.eventually("the second run", 2*time.Minute, func() bool { return len(sorted()) >= 2 })
	setDuration(run)
	e.eventually("the third run ended", 5*time.Minute, func() bool {
		rs := sorted()
		return len(rs) >= 3 && !rs[2].finished.IsZero()
	})
	if err := e.kube.BatchV1().CronJobs(e.ns).Delete(e.ctx, cj.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	rs := sorted()[:3]
	mu.Lock()
	if len(overlapped) > 0 {
		t.Errorf("runs %v started while another ran (Forbid)", overlapped)
	}
	mu.Unlock()
	for i, r := range rs {
		t.Logf("run %d %s: scheduled %s, started %s after it, lasted %s", i+1, r.name, r.scheduled.Format(time.TimeOnly),
			r.created.Sub(r.scheduled).Round(100*time.Millisecond), r.finished.Sub(r.created).Round(100*time.Millisecond))
		if i == 0 {
			continue
		}
		if want := rs[i-1].scheduled.Add(time.Minute); !r.scheduled.Equal(want) {
			t.Errorf("run %d was scheduled for %s, want %s: a run was skipped", i+1, r.scheduled, want)
		}
		t.Logf("gap between run %d and run %d: %s", i, i+1, r.created.Sub(rs[i-1].finished).Round(100*time.Millisecond))
	}
	if !rs[2].created.After(rs[1].finished) || !rs[1].finished.After(rs[2].scheduled) {
		t.Errorf("the run after the overrun: scheduled %s, started %s; the overrun ended %s: want it held back until then",
			rs[2].scheduled, rs[2].created, rs[1].finished)
	}
}

// scheduledAt is the annotation the CronJob controller puts on each Job it makes: the time the run was due.
const scheduledAt = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// finishedJob says j has its Complete or Failed condition.
func finishedJob(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
