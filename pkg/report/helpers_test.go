package report

import "github.com/jobsched/jobsched/pkg/testkit"

// The builders and the in-memory source of this package's tests: the shared test kit's, as pkg/scheduler's tests use.

var (
	now        = testkit.Now
	ago        = testkit.Ago
	testConfig = testkit.Config
	makeJob    = testkit.MakeJob
	makePod    = testkit.MakePod
	rowsFor    = testkit.RowsFor
	name       = testkit.Name
)

type source = testkit.Source
