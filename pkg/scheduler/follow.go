package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/follow"
)

// ErrLost says a watch ended (a 410 Gone, a refused watch) or came back after failing (the API server was away):
// of the Jobs, a wait cannot tell when a Job ends; of the pods or of what capacity follows, what the last pass
// decided from may be stale. The next pass lists afresh.
var ErrLost = errors.New("a watch was lost")

// Follow keeps the observation of one fill run (tick --fill-for) between its passes: set on a Scheduler, its
// first pass lists the Jobs, their pods and what capacity reads, as every pass does, and then watches them from
// those lists' resourceVersions (with a capacity mode that follows every pod in the cluster, nodes or autoscale,
// the pods are read from that one watch: capacity.Follow.Ours); each later pass decides from the
// summaries the watches keep (package follow), so it costs the events it read and its writes, not a list of the
// cluster. A pass's own writes are applied to the followed Jobs as the API server answers them (each Job created, or
// found present, and each deleted), so the next pass decides with them at once, not once the watch delivers them;
// and Resync, called when another holder took the Lease in between, lists everything afresh. A Follow is for one
// Scheduler; Stop ends its watches.
type Follow struct {
	changes  follow.Changes
	jobs     *follow.Feed[batchv1.Job, *batchv1.JobList, string, JobSummary]
	pods     *follow.Feed[corev1.Pod, *corev1.PodList, string, capacity.PodSummary] // unless capacity follows every pod
	capacity capacity.Follow
	// ownPods: our pods are read from pods even in a mode that follows every pod (that list was Forbidden).
	ownPods bool
	// demands shares the Jobs' equal demands (JobSummary.Demand).
	demands demands
	// seen are, per unfinished Job, the names of its pods the run's passes have seen (podsEnded).
	seen map[types.UID]map[string]bool

	mu        sync.Mutex
	ended     int    // Jobs the watch saw end (see Wait)
	endedName string // the last of them
	endedAt   int    // ended at the last observation
	usableAt  int    // capacity.NodesUsable at the last observation
	boundAt   int    // capacity.OursBound at the last observation
	leftAt    int    // capacity.OursLeft at the last observation
	lostAt    int    // losses at the last observation
}

// NewFollow is a Follow for a fill run's passes.
func NewFollow() *Follow {
	f := &Follow{}
	f.capacity.Changes = &f.changes
	return f
}

// Stop ends the watches.
func (f *Follow) Stop() {
	if f.jobs != nil {
		f.jobs.Stop()
		f.pods.Stop()
	}
	f.capacity.Stop()
}

// Resync makes the next pass list everything afresh (another holder of the Lease wrote in between).
func (f *Follow) Resync() { f.Stop() }

// WakeOn is what, besides a Job's end, ends a fill run's wait (Follow.Wait) with a capacity mode that counts the
// nodes (nodes, autoscale).
type WakeOn struct {
	// Nodes: a node turning usable (the capacity fit bound the last pass: Result.CapacityBound).
	Nodes bool
	// Binds: one of our pods bound to a node (the fit awaited them: Result.AwaitsBinds).
	Binds bool
	// Ends: one of our pods leaving its node, its room free before its Job is marked finished (the capacity fit
	// bound the last pass, and a Job makes no other pod after its pod's end: PodEndFrees).
	Ends bool
}

// PodEndFrees says a pod of ours that leaves its node frees its room for good with cfg's Jobs, so that a fill run
// bound by the capacity fit may start its next pass then (WakeOn.Ends), not a second later when the Job
// controller marks the Job finished: each Job of every queue runs one pod, once (parallelism and completions at
// most 1, backoffLimit 0, no backoffLimitPerIndex or podFailurePolicy). A Job that may make another pod after
// one ends would take that room back.
func PodEndFrees(cfg *config.Config) bool {
	one := func(n *int32) bool { return n == nil || *n <= 1 }
	for i := range cfg.AllQueues() {
		tpl := cfg.QueueConfig(i).Template
		if tpl == nil {
			return false
		}
		spec := tpl.Spec
		if !one(spec.Parallelism) || !one(spec.Completions) || spec.BackoffLimit == nil || *spec.BackoffLimit != 0 ||
			spec.BackoffLimitPerIndex != nil || spec.PodFailurePolicy != nil {
			return false
		}
	}
	return true
}

// Wait returns once one of the Jobs the watch follows ends after the last pass's observation (it gets its Complete
// or Failed condition, or is deleted before it finished: either frees the room it held), with its name; with
// on.Nodes, once a node turns usable (capacity.Follow's NodesUsable: an autoscaler's new node, one uncordoned, one
// Ready again), with "node/" and its name; with on.Binds, once one of our pods is bound (capacity.Follow's
// OursBound), with "pod/" and the node it was bound to; with on.Ends, once one of our pods leaves its node
// (capacity.Follow's OursLeft), with "left/" and that node. A watch of the Jobs lost since then, or another watch lost
// or back after failing since the observation (follow.Feed.Losses), is ErrLost; when ctx ends, its cause.
func (f *Follow) Wait(ctx context.Context, on WakeOn) (string, error) {
	if f.jobs == nil || !f.jobs.Watching() {
		return "", errors.New("the Jobs are not watched (no resourceVersion to watch from)")
	}
	name, lost := "", false
	err := f.changes.Until(ctx, func() bool {
		// The feeds first, then f.mu: a feed calls Changed (which takes f.mu) holding its own lock.
		watching, losses := f.jobs.Watching(), f.losses()
		n, node := f.capacity.NodesUsable()
		b, pod := f.capacity.OursBound()
		l, from := f.capacity.OursLeft()
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case f.ended > f.endedAt:
			name = f.endedName
		case on.Nodes && n > f.usableAt:
			name = "node/" + node
		case on.Binds && b > f.boundAt:
			name = "pod/" + pod
		case on.Ends && l > f.leftAt:
			name = "left/" + from
		default:
			lost = losses > f.lostAt
			return lost || !watching
		}
		return true
	})
	switch {
	case err != nil:
		return "", err
	case !f.jobs.Watching():
		return "", fmt.Errorf("%w: %w", ErrLost, f.jobs.Lost())
	case lost:
		return "", fmt.Errorf("%w: of the pods or of what capacity follows", ErrLost)
	}
	return name, nil
}

// losses counts the watches of the feeds lost since the Follow began (follow.Feed.Losses).
func (f *Follow) losses() int {
	return f.jobs.Losses() + f.pods.Losses() + f.capacity.Losses()
}

// made applies a Job the pass created (or found present) to the followed Jobs, and gone a Job it deleted, so that
// the next pass decides with them without waiting for the watch to deliver them (follow.Feed's Made and Gone); a
// nil Follow (a pass that lists) keeps nothing.
func (f *Follow) made(job *batchv1.Job) {
	if f != nil && f.jobs != nil {
		f.jobs.Made(job)
	}
}

func (f *Follow) gone(namespace string, j JobStatus) {
	if f != nil && f.jobs != nil {
		f.jobs.Gone(namespace+"/"+j.Name, j.UID)
	}
}

// init makes the feeds of s's Jobs and their non-terminal pods (once).
func (f *Follow) init(s *Scheduler, watch bool) {
	if f.jobs != nil {
		return
	}
	ns, sel := s.Config.Namespace, s.selector()
	f.jobs = &follow.Feed[batchv1.Job, *batchv1.JobList, string, JobSummary]{Client: s.Kube, Collection: s.Kube.BatchV1().Jobs(ns),
		Options: metav1.ListOptions{LabelSelector: sel}, Watch: watch, Changes: &f.changes,
		Summarize: func(j *batchv1.Job) (JobSummary, bool) { return f.demands.summarize(j), true },
		Changed: func(old JobSummary, had bool, new JobSummary, has bool) {
			if had && old.Finished == nil && (!has || new.Finished != nil) {
				f.mu.Lock()
				f.ended, f.endedName = f.ended+1, old.Name
				f.mu.Unlock()
			}
		}}
	f.pods = &follow.Feed[corev1.Pod, *corev1.PodList, string, capacity.PodSummary]{Client: s.Kube, Collection: s.Kube.CoreV1().Pods(ns),
		Options: metav1.ListOptions{LabelSelector: sel, FieldSelector: capacity.NonTerminal}, Watch: watch, Changes: &f.changes,
		Summarize: capacity.SummarizePod} // it drops terminal pods too: the server filtered already, a fake client does not
}

// podsEnded is, per unfinished Job of jobs, how many of the pods this run's passes saw of it are not in pods
// (ended, or deleted, since): its status may count them active for a second more (the Job controller batches its
// status updates), and they hold no room (decideQueue's ahead). It keeps what it saw for the next pass.
func (f *Follow) podsEnded(jobs []JobSummary, pods []capacity.PodSummary) map[types.UID]int {
	now := map[types.UID]map[string]bool{}
	for _, j := range jobs {
		if j.Finished == nil && !j.Deleting {
			now[j.UID] = map[string]bool{}
		}
	}
	for _, p := range pods {
		if names, ok := now[p.Job]; ok {
			names[p.Name] = true
		}
	}
	var ended map[types.UID]int
	for uid, names := range now {
		for name := range f.seen[uid] {
			if !names[name] {
				if ended == nil {
					ended = map[types.UID]int{}
				}
				ended[uid]++
				names[name] = true // still counted as ended by the next pass, until the Job's status follows
			}
		}
	}
	f.seen = now
	return ended
}

// observed marks the Jobs' ends seen so far as before the observation.
func (f *Follow) observed() {
	usable, _ := f.capacity.NodesUsable() // before f.mu, as in Wait
	bound, _ := f.capacity.OursBound()
	left, _ := f.capacity.OursLeft()
	losses := f.losses()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endedAt = f.ended
	f.usableAt = usable
	f.boundAt = bound
	f.leftAt = left
	f.lostAt = losses
}
