// Command jobsched turns rows in a PostgreSQL table into Kubernetes Jobs, one Job per row, in one stateless pass.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/jobsched/jobsched/cmd"
)

func main() {
	// A pass is short, and nearly all it allocates is the objects it decodes, summarises and drops: collecting at
	// 50% heap growth instead of Go's default 100% keeps its peak low for a little CPU. GOGC, when set, decides.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
