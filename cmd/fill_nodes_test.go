package cmd

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestJobOrNode: the first of the two waits to return wakes the pass and ends the other; a node wait that fails
// leaves the Job's.
func TestJobOrNode(t *testing.T) {
	forbidden := errors.New(`nodes is forbidden: cannot watch resource "nodes"`)
	expired := errors.New("expired")
	tests := []struct {
		name            string
		jobFirst        bool // the Job's wait returns while the node's still waits; else the other way round
		jobErr, nodeErr error
		want            string
		wantErr         error
	}{
		{name: "a Job ends", jobFirst: true, want: "job-a"},
		{name: "a node turns Ready", want: "node/n1"},
		{name: "the Job's wait fails", jobFirst: true, jobErr: expired, want: "job-a", wantErr: expired},
		{name: "the node's wait fails: the Job's goes on", nodeErr: forbidden, want: "job-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeDone, jobDone := make(chan struct{}), make(chan struct{})
			var mu sync.Mutex
			ended := map[string]error{}
			// wait returns name and err at once when it is first, else once its context ends (the other woke the pass).
			wait := func(name string, first bool, err error, mine chan struct{}) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) {
					defer close(mine)
					if first {
						return name, err
					}
					<-ctx.Done()
					mu.Lock()
					ended[name] = context.Cause(ctx)
					mu.Unlock()
					return "", context.Cause(ctx)
				}
			}
			job := wait("job-a", tt.jobFirst, tt.jobErr, jobDone)
			node := wait("n1", !tt.jobFirst, tt.nodeErr, nodeDone)
			if tt.nodeErr != nil { // the Job ends once the node's wait has failed
				job = func(context.Context) (string, error) { <-nodeDone; close(jobDone); return "job-a", nil }
			}
			got, err := jobOrNode(context.Background(), job, node)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			<-jobDone
			<-nodeDone
			for name, err := range ended {
				if !errors.Is(err, errWoken) {
					t.Errorf("wait %s ended with %v, want errWoken", name, err)
				}
			}
		})
	}
}
