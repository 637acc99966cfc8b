package scheduler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/render"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// forged is what anyone who may write a pod's status, an Event or a Job's status in the namespace can put in a
// message: ESC (a terminal's escape), BEL and U+202E (which turns the rest of a line around).
const forged = "\x1b[2J\a\u202egnp.exe"

// TestAPITextQuoted (issue 58, finding 7): a text another party wrote in the API server (a pod's Unschedulable
// message, an autoscaler's FailedScheduling Event, a Job's condition) reaches the plan, and from it jobsched's
// Blocked Event note, its logs and its outputs, quoted: its control and format characters as escapes, never raw.
func TestAPITextQuoted(t *testing.T) {
	job := makeJob("r").Obj()
	failed := makeJob("f").Finished(batchv1.JobFailed, ago(time.Minute)).Reason("BackoffLimitExceeded").Obj()
	failed.Status.Conditions[0].Message = "Job has reached the specified backoff limit" + forged
	pod := makePod(job).Unschedulable("0/1 nodes are available" + forged).Obj()
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + ".1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}, Reason: "FailedScheduling",
		Message: "Failed to schedule pod, all available instance types exceed limits for nodepool" + forged,
		Source:  corev1.EventSource{Component: "karpenter"}, ReportingController: "karpenter",
		LastTimestamp: metav1.NewTime(now)}
	for _, mode := range []config.Capacity{config.CapacityNodes, config.CapacityAutoscale} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) { c.Limits.Capacity = mode })
			client := testkit.NewFake([]runtime.Object{job, failed, pod, event}...)
			s := &Scheduler{workers: 1, Config: cfg, Kube: client, Source: &source{Rows: rowsFor("a")}, Renderer: render.New(cfg, nil), Now: func() time.Time { return now }}
			res, err := s.Run(context.Background(), DryRun)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := json.Marshal(res.Plan) // every text of the plan, as dry-run -o json and the Events read it
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			collect(&texts, res.Plan.Blocked)
			for _, j := range res.Plan.Jobs {
				collect(&texts, j.Reason)
			}
			for _, text := range texts {
				if strings.ContainsAny(text, "\x1b\a\u202e") {
					t.Errorf("raw control or format characters in %q", text)
				}
			}
			if !strings.Contains(string(plan), `\\x1b[2J\\a\\u202egnp.exe`) {
				t.Errorf("the plan does not carry the forged text quoted:\n%s", plan)
			}
		})
	}
}

func collect(texts *[]string, s string) {
	if s != "" {
		*texts = append(*texts, s)
	}
}
