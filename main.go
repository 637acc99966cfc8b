// Command jobsched turns rows in a PostgreSQL table into Kubernetes Jobs, one Job per row, in one stateless pass.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobsched/jobsched/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
