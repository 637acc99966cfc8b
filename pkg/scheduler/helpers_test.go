package scheduler

import "github.com/jobsched/jobsched/pkg/testkit"

// The builders, the in-memory source and the action recorder of this package's tests: the shared test kit's.

var (
	now        = testkit.Now
	testConfig = testkit.Config
	job        = testkit.Job
	pendingPod = testkit.PendingPod
	rowsFor    = testkit.RowsFor
	actions    = testkit.Actions
	action     = testkit.Action
	attempt    = testkit.Attempt
	name       = testkit.Name
)

type source = testkit.Source
