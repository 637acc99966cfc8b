package cmd

import (
	"os"
	"runtime/debug"
)

// The collector policy of the process, set here and nowhere else. A pass is short, and while it lists its live heap
// is small (a summary of each Job) and nearly all it allocates is the objects it decodes and drops at once:
// collecting at 25% heap growth instead of Go's 100% keeps its peak near the live heap, and a collection of a small
// heap is cheap. Once it creates, it holds the Jobs it renders and allocates per request, and the API server on the
// same cores can use the CPU a tight collector would spend: the creates collect at Go's default. A fill run goes
// back to 25% after each pass: between passes it holds what it follows (every non-terminal pod of the cluster,
// about 50 B each: BenchmarkFollowedPods), and at Go's default the watch's garbage could grow the heap to twice
// that while it waits. GOGC, when set, decides alone.
const (
	gcListing  = 25
	gcCreating = 100
)

func gogcSet() bool {
	_, set := os.LookupEnv("GOGC")
	return set
}

// gcForListing sets the policy a command starts with.
func gcForListing() {
	if !gogcSet() {
		debug.SetGCPercent(gcListing)
	}
}

// gcForCreates is the scheduler's BeforeCreates: the policy from the first create on (nil when GOGC decides).
func gcForCreates() func() {
	if gogcSet() {
		return nil
	}
	return func() { debug.SetGCPercent(gcCreating) }
}
