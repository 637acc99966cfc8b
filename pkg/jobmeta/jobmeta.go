// Package jobmeta names the keys by which jobsched recognises a Job as its own.
package jobmeta

// Labels and annotations jobsched puts on what it creates.
const (
	LabelScheduler    = "jobsched.io/scheduler"
	LabelTask         = "jobsched.io/task"
	LabelAttempt      = "jobsched.io/attempt"
	AnnotationTaskKey = "jobsched.io/task-key"
	// LabelQueue is on every Job (and pod) of an explicit queue (config queues:); a Job without it belongs to the
	// queue named after the install, else to the first queue (config.DefaultQueue).
	LabelQueue = "jobsched.io/queue"
	// AnnotationGroup is the row's group (limits.perGroup.column's value, exactly; NULL is "") on every Job of a
	// queue with limits.perGroup: the pass counts a group's unfinished Jobs from it. LabelGroup is the same value
	// when it is a valid label value, else render.GroupLabel's hash of it, for selectors.
	AnnotationGroup = "jobsched.io/group"
	LabelGroup      = "jobsched.io/group"
)
