package scheduler

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobsched/jobsched/pkg/testkit"
)

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

// runningPod is the pod of the Job of key (makeJob's, active 1), bound to n1 and started.
func runningPod(key string) *corev1.Pod {
	return makePod(makeJob(key).Obj()).Bound("n1").Phase(corev1.PodRunning).Obj()
}

// besidePass is acts with the deletes of the named finished Jobs taken from their place and put at the end, in
// name order: they run beside the rest of the pass (deletesBehind), so where they fall among its other calls is no
// promise. Applied to both the wanted and the recorded actions, a comparison still pins every other call's order
// and that each of those deletes is made exactly once.
func besidePass(acts []string, finished ...string) []string {
	var rest, behind []string
	for _, a := range acts {
		if f := strings.Fields(a); len(f) > 2 && f[0] == "delete" && f[1] == "jobs" && slices.Contains(finished, f[2]) {
			behind = append(behind, a)
			continue
		}
		rest = append(rest, a)
	}
	slices.Sort(behind)
	return append(rest, behind...)
}
