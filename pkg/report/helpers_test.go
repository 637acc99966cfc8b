package report

import "github.com/jobsched/jobsched/pkg/testkit"

// The builders and the in-memory source of this package's tests: the shared test kit's, as pkg/scheduler's tests use.

var (
	now        = testkit.Now
	testConfig = testkit.Config
	job        = testkit.Job
	attempt    = testkit.Attempt
	pendingPod = testkit.PendingPod
	rowsFor    = testkit.RowsFor
	name       = testkit.Name
)

type source = testkit.Source
