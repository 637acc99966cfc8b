// Package labeler holds the labels a capacity mode puts on each Job (capacity.Labeler), by the mode's name:
// capacity.Register records a mode's here, and the Job renderer asks for the configured mode's. It is apart from
// pkg/capacity so that the renderer, which capacity's own tests use (through pkg/testkit), need not import it.
package labeler

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobsched/jobsched/pkg/config"
)

// Labeler is a capacity mode that puts labels of its own on each Job (kueue: its LocalQueue and priority class).
type Labeler interface {
	// Label puts the mode's labels on job, rendered for a row whose column name's value col gives (ok false: the
	// query returns no such column). An error is the row's, or a *config.Error when the configuration is wrong.
	Label(cfg *config.Config, col func(name string) (value string, null, ok bool), job *batchv1.Job) error
}

var registry = struct {
	sync.RWMutex
	of map[config.Capacity]Labeler
}{of: map[config.Capacity]Labeler{}}

// Register records mode's Labeler (capacity.Register calls it).
func Register(mode config.Capacity, l Labeler) {
	registry.Lock()
	defer registry.Unlock()
	registry.of[mode] = l
}

// Of is the Labeler of mode, ok false when it puts no label.
func Of(mode config.Capacity) (l Labeler, ok bool) {
	registry.RLock()
	defer registry.RUnlock()
	l, ok = registry.of[mode]
	return l, ok
}
