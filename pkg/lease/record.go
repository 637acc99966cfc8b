package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
)

// A record on the Lease: one annotation (Config.Annotation) that the holder reads as it takes the Lease and writes
// with its renewals, so that what a pass must leave to the next (the rate windows, package rate) lives in the
// cluster with the lock, and is written under it. The lock (lock.go) writes the Lease's spec and keeps its metadata
// as the last answer held it; the annotation rides on its reads and writes, so the record is written by the same
// conditional update as the lock, never by a write of its own that would race a renewal.

// annotation is the one annotation a Held carries: what the last answer held, and what the next writes set. A nil
// *annotation is none: it sees nothing and sets nothing.
type annotation struct {
	key string
	mu  sync.Mutex
	// seen and found are the annotation as the last read or write returned it.
	seen  string
	found bool
	// created is the Lease's creationTimestamp as the last answer held it (the API server sets it).
	created time.Time
	// set, when not nil, is what each write sets it to.
	set *string
}

func (a *annotation) saw(l *coordinationv1.Lease) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen, a.found, a.created = "", false, time.Time{}
	if l != nil {
		a.seen, a.found = l.Annotations[a.key]
		a.created = l.CreationTimestamp.Time
	}
}

// apply is l with the annotation set, when a value is to be written (a copy: the lock keeps its own).
func (a *annotation) apply(l *coordinationv1.Lease) *coordinationv1.Lease {
	if a == nil {
		return l
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set == nil {
		return l
	}
	l = l.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[a.key] = *a.set
	return l
}

func (a *annotation) get() (string, bool) {
	if a == nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen, a.found
}

func (a *annotation) createdAt() time.Time {
	if a == nil {
		return time.Time{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created
}

func (a *annotation) setTo(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set = &v
}

// Record is Config.Annotation as the Lease held it when this holder took it, and whether it was there (not on a
// Lease this holder created, nor on one written without it).
func (h *Held) Record() (string, bool) { return h.taken, h.takenFound }

// Created is the Lease's creationTimestamp when this holder took it (zero when the answer had none): the record
// knows nothing of what happened before it.
func (h *Held) Created() time.Time { return h.takenCreated }

// WriteRecord writes value as Config.Annotation now, in a renewal of the Lease (conditional on the version the holder
// last wrote, like every renewal); every later write (renewals, the release) keeps it. An error means it may not
// have been written.
func (h *Held) WriteRecord(ctx context.Context, value string) error {
	if h.lock.ann == nil {
		return errors.New("the Lease was taken without a record")
	}
	h.lockMu.Lock()
	defer h.lockMu.Unlock()
	if err := h.ctx.Err(); err != nil {
		return context.Cause(h.ctx)
	}
	h.lock.ann.setTo(value)
	h.mu.Lock()
	next := record(&h.record, h.cfg, h.cfg.Clock.Now())
	h.mu.Unlock()
	if err := h.lock.update(ctx, next); err != nil {
		return fmt.Errorf("writing the record on Lease %s: %w", h.cfg.Name, err)
	}
	h.mu.Lock()
	h.record = next
	h.mu.Unlock()
	return nil
}

// SettleRecord makes value what the Lease's next writes (a renewal, the release) carry as Config.Annotation.
func (h *Held) SettleRecord(value string) {
	if h.lock.ann != nil {
		h.lock.ann.setTo(value)
	}
}

// ReadRecord reads annotation key of scheduler's Lease (one GET) for a report that never takes it: found is false
// when the Lease or the annotation is not there.
func ReadRecord(ctx context.Context, client kube.CoordinationV1, namespace, scheduler, key string) (value string, found bool, created time.Time, err error) {
	l, err := client.Leases(namespace).Get(ctx, Name(scheduler), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, time.Time{}, nil
	}
	if err != nil {
		return "", false, time.Time{}, fmt.Errorf("reading Lease %s: %w", Name(scheduler), err)
	}
	value, found = l.Annotations[key]
	return value, found, l.CreationTimestamp.Time, nil
}

// Record is the record of the Lease this pass holds (see Held.Record); ok is false when it holds none (not taken,
// or the Role lacks the Lease's verbs: nothing is kept between passes).
func (g *Guard) Record() (value string, found, ok bool) {
	g.mu.Lock()
	h := g.held
	g.mu.Unlock()
	if h == nil || h.lock.ann == nil {
		return "", false, false
	}
	value, found = h.Record()
	return value, found, true
}

// LeaseCreated is Held.Created of the Lease this pass holds (zero: none).
func (g *Guard) LeaseCreated() time.Time {
	g.mu.Lock()
	h := g.held
	g.mu.Unlock()
	if h == nil {
		return time.Time{}
	}
	return h.Created()
}

// WriteRecord is Held.WriteRecord on the Lease this pass holds.
func (g *Guard) WriteRecord(ctx context.Context, value string) error {
	g.mu.Lock()
	h := g.held
	g.mu.Unlock()
	if h == nil {
		return errors.New("no Lease held: the record cannot be written")
	}
	return h.WriteRecord(ctx, value)
}

// SettleRecord is Held.SettleRecord on the Lease this pass holds (none: nothing).
func (g *Guard) SettleRecord(value string) {
	g.mu.Lock()
	h := g.held
	g.mu.Unlock()
	if h != nil {
		h.SettleRecord(value)
	}
}
