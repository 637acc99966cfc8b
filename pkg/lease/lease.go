// Package lease makes one pass of a scheduler at a time the one that creates.
//
// It holds a coordination.k8s.io/v1 Lease in the cluster while it observes and creates, so the cluster keeps the
// lock and jobsched keeps no state.
//
// The Lease is taken with an optimistic-concurrency write (a create, or an update conditional on the
// resourceVersion that was read): of two passes that race, exactly one write succeeds. A holder that stops renewing
// (SIGKILL, a lost node) is taken over once the Lease has gone unrenewed for its duration, counted on the taker's
// own clock from when it first saw that version of the record, as client-go's leader election does: no two clocks
// are compared. The holder stops creating before that: its Context ends at the first renewal that fails, and at the
// latest a margin before its last successful renewal's duration runs out.
//
// # How it keeps its promises
//
// What users rely on (the wait, the takeover, what losing it does, the RBAC and the API calls it costs) is
// `jobsched help lease` (cmd/help/lease.md); a change of behaviour changes it too. Here is how the code holds it:
//
//   - Acquire is the one optimistic write (a create, or an update conditional on the resourceVersion read); a
//     *HeldError after Config.Wait. Guard.Take is what a tick calls: it waits at most MaxWait (one duration and a
//     second, at most half of what is left of the pass) and records what `pass done` says (Guard.Report).
//   - The next holder lists its Jobs after the previous one's creates (a consistent list), so maxActive and the
//     capacity fit are exact across racing passes; the chaos run checks this at every observation
//     (scripts/README.md, Chaos).
//   - Held renews every third of the duration; its Context ends at the first renewal that fails (ErrLost) and at the
//     latest after validity (two thirds of the duration) from the last renewal that succeeded, a third before any
//     taker may take over, so that what was in flight has landed when the next holder observes. Stop ends a hold
//     without releasing it (a pass cut short), Release gives it up.
//   - Takeover (Free) counts the holder's silence on the taker's own clock from when it first saw that version of
//     the record; the unit tests run on a fake clock (Config.Clock).
//   - A record (Config.Annotation, record.go) rides on the lock's own reads and writes: the rate windows of
//     limits.rate, written under the lock by WriteRecord and by the release.
//   - Guard.Confirm: a Forbidden is taken as the Role's answer (ErrForbidden: the pass runs unserialised) only after
//     a read the Role grants has succeeded, because an API server that has just started refuses everything until
//     its RBAC cache is filled.
//
// # Why not client-go's leader election
//
// tools/leaderelection's LeaderElector is made for a process that campaigns until it leads and then leads until it
// dies: Run blocks, retries without end and calls back when leading starts and stops, and ReleaseOnCancel gives
// the Lease up on every cancel. A pass needs a bounded try with an answer (HeldError after the wait, so that it
// still deletes and reports), a Forbidden taken as the Role's answer only after a granted read (an API server's
// cold RBAC cache), and Stop without a release when its creates were cut short (the next holder must observe
// after they landed). Its record is LeaderElector's (holder, duration, acquire and renew times, transitions), read
// and written as client-go's resourcelock.LeaseLock, which LeaderElector uses, does: each write is conditional on
// the version read, and the field manager is the client's (jobsched). lock.go does it without importing
// resourcelock, which links client-go's whole clientset (see kube.Interface); its tests compare it with
// resourcelock's. The takeover rule (unrenewed for its duration on the taker's own clock since it first saw that
// record) is LeaderElector's.
package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/jobsched/jobsched/pkg/apitext"
	"github.com/jobsched/jobsched/pkg/kube"
)

// DefaultDuration is how long a holder that stopped renewing (killed) keeps the others from creating.
const DefaultDuration = 15 * time.Second

// Name is the Lease of the scheduler called scheduler.
func Name(scheduler string) string { return "jobsched-" + scheduler }

// Holder names this process: the pod's name (POD_NAME, from the downward API, as the CronJob sets it), else the
// host's name and the process id.
func Holder(getenv func(string) string, hostname string, pid int) string {
	if pod := getenv("POD_NAME"); pod != "" {
		return pod
	}
	return hostname + "_" + strconv.Itoa(pid)
}

// HolderFromEnv is Holder for this process.
func HolderFromEnv() string {
	host, _ := os.Hostname()
	return Holder(os.Getenv, host, os.Getpid())
}

// Config says which Lease to take and how.
type Config struct {
	Client    kube.CoordinationV1
	Namespace string
	Name      string
	Holder    string
	// Duration is the Lease's leaseDurationSeconds (default DefaultDuration); the holder renews every third of it
	// and considers it its own until a third before it runs out after its last renewal.
	Duration time.Duration
	// Wait bounds how long Acquire waits for a live holder to release the Lease or stop renewing it (0: it does
	// not wait).
	Wait time.Duration
	// Poll is how often Acquire reads the Lease while it waits (default 500ms).
	Poll time.Duration
	// Clock is the holder's own clock, on which the waits, the renewals and the takeover are timed (default the
	// real one; tests give a fake one).
	Clock clock.WithTicker
	// Annotation, when set, is the key of the Lease's record (record.go): read as it is taken, written with it.
	Annotation string
	// Parent, when set, is the context the hold lives under (its Context's parent) instead of Acquire's: a hold
	// kept after the pass that took it (Guard.Keep).
	Parent context.Context
}

// HeldError is Acquire's answer when another holder kept the Lease for the whole wait.
type HeldError struct {
	Name, Holder string
	Waited       time.Duration
}

func (e *HeldError) Error() string {
	// Anyone with update on leases writes the holder; this text reaches an Event's note.
	return fmt.Sprintf("Lease %s is held by %s (waited %s)", e.Name, apitext.Quote(e.Holder), e.Waited.Round(100*time.Millisecond))
}

// ErrForbidden is wrapped in Acquire's error when the Role does not grant get, create and update on leases.
var ErrForbidden = errors.New("no RBAC for coordination.k8s.io leases (get, create, update)")

// ErrLost is the cause of a Held's Context when the Lease may no longer be this holder's.
var ErrLost = errors.New("lost the Lease")

// Held is a Lease this process holds and renews until Release or Stop.
type Held struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}

	lock   *lock // written by one goroutine at a time (lockMu): Acquire's, then renew's or WriteRecord's, then Release's
	lockMu sync.Mutex
	// taken is what the record's annotation (lock.ann) held when the Lease was taken.
	taken        string
	takenFound   bool
	takenCreated time.Time

	mu     sync.Mutex
	record LockRecord // as last written
	lost   error
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Poll <= 0 {
		c.Poll = 500 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}

// seconds is d as leaseDurationSeconds, at least 1.
func seconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// Acquire takes the Lease, waiting up to cfg.Wait for a live holder. It returns a *HeldError when the Lease stayed
// held, and an error wrapping ErrForbidden when the Role lacks the verbs.
func Acquire(ctx context.Context, cfg Config) (*Held, error) {
	cfg.defaults()
	lock := &lock{client: cfg.Client.Leases(cfg.Namespace), namespace: cfg.Namespace, name: cfg.Name}
	if cfg.Annotation != "" {
		lock.ann = &annotation{key: cfg.Annotation}
	}
	clk := cfg.Clock
	start := clk.Now()
	var seen []byte // the record as last read
	var seenAt time.Time
	for {
		sent := clk.Now()
		cur, raw, err := lock.get(ctx)
		if apierrors.IsNotFound(err) {
			rec := record(nil, cfg, sent)
			err := lock.create(ctx, rec)
			if apierrors.IsAlreadyExists(err) {
				continue // another pass created it first: read it
			}
			if err != nil {
				return nil, classify(cfg, "creating", err)
			}
			return cfg.hold(cfg.parent(ctx), lock, rec, sent), nil
		}
		if err != nil {
			return nil, classify(cfg, "reading", err)
		}
		now := clk.Now()
		if seenAt.IsZero() || !bytes.Equal(raw, seen) {
			seen, seenAt = raw, now
		}
		if Free(cur, cfg.Holder, seenAt, now) {
			sent = clk.Now()
			rec := record(cur, cfg, sent)
			err := lock.update(ctx, rec) // conditional on the resourceVersion Get read
			if apierrors.IsConflict(err) {
				continue // another pass wrote it since we read it: read it again
			}
			if err != nil {
				return nil, classify(cfg, "taking", err)
			}
			return cfg.hold(cfg.parent(ctx), lock, rec, sent), nil
		}
		waited := now.Sub(start)
		if waited >= cfg.Wait {
			return nil, &HeldError{Name: cfg.Name, Holder: cur.HolderIdentity, Waited: waited}
		}
		pause := min(cfg.Poll, cfg.Wait-waited, expiry(cur, seenAt).Sub(clk.Now()))
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-clk.After(max(pause, 10*time.Millisecond)):
		}
	}
}

// Free says whether a holder called holder may take the Lease whose record is r now: nobody holds it (released),
// holder does, or it has gone unrenewed for its duration since seenAt, when this record was first seen.
func Free(r *LockRecord, holder string, seenAt, now time.Time) bool {
	if r.HolderIdentity == "" || r.HolderIdentity == holder {
		return true
	}
	return !now.Before(expiry(r, seenAt))
}

// expiry is when the Lease of record r, first seen at seenAt, is free if nobody renews it.
func expiry(r *LockRecord, seenAt time.Time) time.Time {
	d := DefaultDuration
	if r.LeaseDurationSeconds > 0 {
		d = time.Duration(r.LeaseDurationSeconds) * time.Second
	}
	return seenAt.Add(d)
}

// record is cur (nil: a new Lease) as held by cfg.Holder from now: a new holder's acquire time and one more
// transition (none for a new Lease), as LeaderElector writes them.
func record(cur *LockRecord, cfg Config, now time.Time) LockRecord {
	var r LockRecord
	if cur != nil {
		r = *cur
	}
	t := metav1.NewTime(now)
	if cur == nil || r.HolderIdentity != cfg.Holder {
		r.AcquireTime = t
		if cur != nil {
			r.LeaderTransitions++
		}
	}
	r.HolderIdentity = cfg.Holder
	r.LeaseDurationSeconds = seconds(cfg.Duration)
	r.RenewTime = t
	return r
}

func classify(cfg Config, what string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s Lease %s: %w: %w", what, cfg.Name, ErrForbidden, err)
	}
	return fmt.Errorf("%s Lease %s: %w", what, cfg.Name, err)
}

// parent is what a hold taken by Acquire(ctx) lives under.
func (c Config) parent(ctx context.Context) context.Context {
	if c.Parent != nil {
		return c.Parent
	}
	return ctx
}

// hold starts renewing the Lease of lock, whose record r was written at sent.
func (cfg Config) hold(parent context.Context, lock *lock, r LockRecord, sent time.Time) *Held {
	h := &Held{cfg: cfg, lock: lock, record: r, stop: make(chan struct{}), done: make(chan struct{})}
	h.taken, h.takenFound = lock.ann.get()
	h.takenCreated = lock.ann.createdAt()
	h.ctx, h.cancel = context.WithCancelCause(parent)
	go h.renew(sent)
	return h
}

// transitions is the Lease's leaderTransitions as last written.
func (h *Held) transitions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.record.LeaderTransitions
}

// validity is how long after a successful write the holder takes the Lease as its own: a third of its duration
// less than the others wait, for the creates in flight to land and for clocks that run at slightly different rates.
func (h *Held) validity() time.Duration { return h.cfg.Duration - h.cfg.Duration/3 }

// renew writes the Lease every third of its duration, each write conditional on the version it last wrote. The
// first write that fails, or that has not succeeded before the Lease's validity runs out, ends Context.
func (h *Held) renew(sent time.Time) {
	defer close(h.done)
	every := h.cfg.Duration / 3
	clk := h.cfg.Clock
	t := clk.NewTicker(every)
	defer t.Stop()
	for {
		deadline := sent.Add(h.validity())
		select {
		case <-h.stop:
			return
		case <-h.ctx.Done():
			return
		case <-clk.After(deadline.Sub(clk.Now())):
			h.lose(fmt.Errorf("%w: not renewed within %s", ErrLost, h.validity()))
			return
		case <-t.C():
		}
		now := clk.Now()
		h.mu.Lock()
		next := record(&h.record, h.cfg, now)
		h.mu.Unlock()
		// The write gets until the validity runs out, and so does the wait for it, whatever the client does (a
		// write still unanswered then keeps the lock: the Lease is lost, nothing uses it again).
		rctx, cancel := context.WithDeadline(h.ctx, deadline)
		res := make(chan error, 1)
		go func() {
			h.lockMu.Lock()
			defer h.lockMu.Unlock()
			res <- h.lock.update(rctx, next)
		}()
		var err error
		select {
		case err = <-res:
		case <-clk.After(deadline.Sub(clk.Now())):
			err = fmt.Errorf("no answer within %s", h.validity())
		}
		cancel()
		if err != nil {
			select {
			case <-h.stop: // released meanwhile: not a loss
				return
			default:
			}
			h.lose(fmt.Errorf("%w: renewing it failed: %w", ErrLost, err))
			return
		}
		h.mu.Lock()
		h.record, sent = next, now
		h.mu.Unlock()
	}
}

func (h *Held) lose(err error) {
	h.mu.Lock()
	h.lost = err
	h.mu.Unlock()
	h.cancel(err)
}

// Context is done as soon as the Lease may no longer be this holder's (its cause wraps ErrLost), or when the
// context Acquire was given is done. Creates run under it.
func (h *Held) Context() context.Context { return h.ctx }

// Lost is why the Lease was lost, or nil.
func (h *Held) Lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// Stop ends the renewals and leaves the Lease to expire: for a holder whose writes may still be in flight (its
// creates were cut short), so that the next holder observes only after they landed.
func (h *Held) Stop() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// Release ends the renewals and gives the Lease up (an empty holder), so the next pass takes it at once. A Lease
// already lost is left alone.
func (h *Held) Release(ctx context.Context) error {
	h.Stop()
	defer h.cancel(errors.New("the Lease was released"))
	if h.Lost() != nil {
		return nil
	}
	h.mu.Lock()
	r := h.record
	h.mu.Unlock()
	r.HolderIdentity = ""
	r.RenewTime = metav1.NewTime(h.cfg.Clock.Now())
	if err := h.lock.update(ctx, r); err != nil {
		return fmt.Errorf("releasing Lease %s: %w", h.cfg.Name, err)
	}
	return nil
}
