package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// A record on the Lease: one annotation (Config.Annotation) that the holder reads as it takes the Lease and writes
// with its renewals, so that what a pass must leave to the next (the rate windows, package rate) lives in the
// cluster with the lock, and is written under it. resourcelock.LeaseLock writes the Lease's spec only and keeps its
// metadata as the last answer held it; the annotation rides on its reads and writes through the client it is given
// (annotatedClient), so the record is written by the same conditional update as the lock, never by a write of its
// own that would race a renewal.

// annotation is the one annotation a Held carries: what the last answer held, and what the next writes set.
type annotation struct {
	key string
	mu  sync.Mutex
	// seen and found are the annotation as the last read or write returned it.
	seen  string
	found bool
	// set, when not nil, is what each write sets it to.
	set *string
}

func (a *annotation) saw(l *coordinationv1.Lease) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen, a.found = "", false
	if l != nil {
		a.seen, a.found = l.Annotations[a.key]
	}
}

// apply is l with the annotation set, when a value is to be written (a copy: the lock keeps its own).
func (a *annotation) apply(l *coordinationv1.Lease) *coordinationv1.Lease {
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
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen, a.found
}

func (a *annotation) setTo(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set = &v
}

// annotatedClient is the lock's client: every Lease it reads or writes passes the annotation by.
type annotatedClient struct {
	coordinationclient.LeasesGetter
	a *annotation
}

func (c annotatedClient) Leases(namespace string) coordinationclient.LeaseInterface {
	return annotatedLeases{LeaseInterface: c.LeasesGetter.Leases(namespace), a: c.a}
}

type annotatedLeases struct {
	coordinationclient.LeaseInterface
	a *annotation
}

func (l annotatedLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, err := l.LeaseInterface.Get(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) {
		l.a.saw(lease)
	}
	return lease, err
}

func (l annotatedLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	res, err := l.LeaseInterface.Create(ctx, l.a.apply(lease), opts)
	if err == nil {
		l.a.saw(res)
	}
	return res, err
}

func (l annotatedLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	res, err := l.LeaseInterface.Update(ctx, l.a.apply(lease), opts)
	if err == nil {
		l.a.saw(res)
	}
	return res, err
}

// Record is Config.Annotation as the Lease held it when this holder took it, and whether it was there (not on a
// Lease this holder created, nor on one written without it).
func (h *Held) Record() (string, bool) { return h.taken, h.takenFound }

// WriteRecord writes value as Config.Annotation now, in a renewal of the Lease (conditional on the version the holder
// last wrote, like every renewal); every later write (renewals, the release) keeps it. An error means it may not
// have been written.
func (h *Held) WriteRecord(ctx context.Context, value string) error {
	if h.ann == nil {
		return errors.New("the Lease was taken without a record")
	}
	h.lockMu.Lock()
	defer h.lockMu.Unlock()
	if err := h.ctx.Err(); err != nil {
		return context.Cause(h.ctx)
	}
	h.ann.setTo(value)
	h.mu.Lock()
	next := record(&h.record, h.cfg, h.cfg.Clock.Now())
	h.mu.Unlock()
	if err := h.lock.Update(ctx, next); err != nil {
		return fmt.Errorf("writing the record on Lease %s: %w", h.cfg.Name, err)
	}
	h.mu.Lock()
	h.record = next
	h.mu.Unlock()
	return nil
}

// SettleRecord makes value what the Lease's next writes (a renewal, the release) carry as Config.Annotation.
func (h *Held) SettleRecord(value string) {
	if h.ann != nil {
		h.ann.setTo(value)
	}
}

// ReadRecord reads annotation key of scheduler's Lease (one GET) for a report that never takes it: found is false
// when the Lease or the annotation is not there.
func ReadRecord(ctx context.Context, client coordinationclient.LeasesGetter, namespace, scheduler, key string) (value string, found bool, err error) {
	l, err := client.Leases(namespace).Get(ctx, Name(scheduler), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading Lease %s: %w", Name(scheduler), err)
	}
	value, found = l.Annotations[key]
	return value, found, nil
}

// Record is the record of the Lease this pass holds (see Held.Record); ok is false when it holds none (not taken,
// or the Role lacks the Lease's verbs: nothing is kept between passes).
func (g *Guard) Record() (value string, found, ok bool) {
	g.mu.Lock()
	h := g.held
	g.mu.Unlock()
	if h == nil || h.ann == nil {
		return "", false, false
	}
	value, found = h.Record()
	return value, found, true
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
