//go:build integration

package jobend

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// externalJob is a Job the Job controller leaves alone (spec.managedBy), so the test writes its status itself.
func externalJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"jobsched.io/scheduler": "wait"}},
		Spec: batchv1.JobSpec{ManagedBy: new("jobsched.io/test"), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "worker:1"}}}}},
	}
}

// complete writes what the Job controller writes when a Job succeeds.
func complete(t *testing.T, ctx context.Context, c kubernetes.Interface, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	job, err := c.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// TestWaitJobEndRealServer: on a real API server, a wait from a list's resourceVersion sleeps through a new Job,
// a change to and the delete of a Job that had finished when listed, and wakes when a listed Job completes; a Job
// deleted unfinished wakes it too. (A 410 Gone is TestWaitJobEnd's: on a young cluster etcd still keeps every
// revision, so no resourceVersion is reliably expired here.)
func TestWaitJobEndRealServer(t *testing.T) {
	c, ns := testkit.RealCluster(t, "kube-wait")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := c.BatchV1().Jobs(ns)
	create := func(name string) *batchv1.Job {
		j, err := jobs.Create(ctx, externalJob(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	done := complete(t, ctx, c, create("done"))
	running := create("running")
	const sel = "jobsched.io/scheduler=wait"
	list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	finished := map[types.UID]bool{done.UID: true}

	type result struct {
		name string
		err  error
	}
	woke := make(chan result, 1)
	go func() {
		name, err := Wait(ctx, jobs, sel, list.ResourceVersion, finished)
		woke <- result{name, err}
	}()
	// None of these frees room; the wait sees them in order, before the completion.
	added := create("added")
	done.Labels["touched"] = "yes"
	if _, err := jobs.Update(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Delete(ctx, "done", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	running = complete(t, ctx, c, running)
	if r := <-woke; r.err != nil || r.name != "running" {
		t.Fatalf("woke with %q, %v; want running", r.name, r.err)
	}

	// From the resourceVersion of the completion on, the unfinished Job "added" is deleted.
	go func() {
		name, err := Wait(ctx, jobs, sel, running.ResourceVersion, map[types.UID]bool{running.UID: true})
		woke <- result{name, err}
	}()
	if err := jobs.Delete(ctx, added.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := <-woke; r.err != nil || r.name != "added" {
		t.Fatalf("woke with %q, %v; want added (deleted unfinished)", r.name, r.err)
	}
}
