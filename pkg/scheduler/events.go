package scheduler

import batchv1 "k8s.io/api/batch/v1"

// Events is where a pass reports what Kubernetes users look for with `kubectl describe job` and `kubectl get
// events`: each Job it creates (with the task key, the attempt and why there was room) and deletes, and a pass that
// creates nothing for a reason other than an empty backlog (waits: it waits as configured, Plan.Waits). The
// implementation rate-limits; a nil Events reports nothing. Reporting never fails a pass.
type Events interface {
	JobCreated(job *batchv1.Job, c Create, room string)
	JobDeleted(j JobStatus)
	PassBlocked(reason string, waits bool)
}
