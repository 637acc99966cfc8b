package scheduler

import "github.com/jobsched/jobsched/pkg/testkit"

// The builders, the in-memory source and the action recorder of this package's tests: the shared test kit's.

var (
	now        = testkit.Now
	ago        = testkit.Ago
	testConfig = testkit.Config
	makeJob    = testkit.MakeJob
	makePod    = testkit.MakePod
	makeNode   = testkit.MakeNode
	rowsFor    = testkit.RowsFor
	actions    = testkit.Actions
	action     = testkit.Action
	name       = testkit.Name
)

type source = testkit.Source
