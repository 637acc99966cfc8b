package lease

import (
	"context"
	"encoding/json"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
)

// The lock: the Lease read and written as client-go's resourcelock.LeaseLock reads and writes it for its leader
// election, without importing it (tools/leaderelection/resourcelock links client-go's whole clientset; see
// kube.Interface). What is copied is small and pinned by the tests against client-go's own: the record (LockRecord,
// resourcelock.LeaderElectionRecord field for field), its conversion to and from the Lease's spec, and the lock's
// three calls (a GET; a create; an update of the Lease last read or written, so conditional on its resourceVersion).

// LockRecord is what a Lease's spec says of its holder: resourcelock.LeaderElectionRecord, the same fields.
type LockRecord struct {
	HolderIdentity       string                                  `json:"holderIdentity"`
	LeaseDurationSeconds int                                     `json:"leaseDurationSeconds"`
	AcquireTime          metav1.Time                             `json:"acquireTime"`
	RenewTime            metav1.Time                             `json:"renewTime"`
	LeaderTransitions    int                                     `json:"leaderTransitions"`
	Strategy             coordinationv1.CoordinatedLeaseStrategy `json:"strategy"`
	PreferredHolder      string                                  `json:"preferredHolder"`
}

// recordOf is the record of a Lease's spec (resourcelock.LeaseSpecToLeaderElectionRecord).
func recordOf(spec *coordinationv1.LeaseSpec) *LockRecord {
	var r LockRecord
	if spec.HolderIdentity != nil {
		r.HolderIdentity = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.LeaseDurationSeconds = int(*spec.LeaseDurationSeconds)
	}
	if spec.LeaseTransitions != nil {
		r.LeaderTransitions = int(*spec.LeaseTransitions)
	}
	if spec.AcquireTime != nil {
		r.AcquireTime = metav1.Time{Time: spec.AcquireTime.Time}
	}
	if spec.RenewTime != nil {
		r.RenewTime = metav1.Time{Time: spec.RenewTime.Time}
	}
	if spec.PreferredHolder != nil {
		r.PreferredHolder = *spec.PreferredHolder
	}
	if spec.Strategy != nil {
		r.Strategy = *spec.Strategy
	}
	return &r
}

// specOf is the Lease spec that holds r (resourcelock.LeaderElectionRecordToLeaseSpec).
func specOf(r LockRecord) coordinationv1.LeaseSpec {
	duration, transitions := int32(r.LeaseDurationSeconds), int32(r.LeaderTransitions)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &r.HolderIdentity,
		LeaseDurationSeconds: &duration,
		AcquireTime:          &metav1.MicroTime{Time: r.AcquireTime.Time},
		RenewTime:            &metav1.MicroTime{Time: r.RenewTime.Time},
		LeaseTransitions:     &transitions,
	}
	if r.PreferredHolder != "" {
		spec.PreferredHolder = &r.PreferredHolder
	}
	if r.Strategy != "" {
		spec.Strategy = &r.Strategy
	}
	return spec
}

// lock is one Lease as this holder last read or wrote it. Every Lease it reads or writes passes the record's
// annotation by (ann, nil without Config.Annotation), so the record rides on the lock's own writes.
type lock struct {
	client          kube.Leases
	namespace, name string
	ann             *annotation
	lease           *coordinationv1.Lease // the last answer; nil before the first
}

// get reads the Lease: its record and that record as JSON (which Acquire compares to tell a new record).
func (l *lock) get(ctx context.Context) (*LockRecord, []byte, error) {
	lease, err := l.client.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l.ann.saw(nil)
	}
	if err != nil {
		return nil, nil, err
	}
	l.lease = lease
	l.ann.saw(lease)
	r := recordOf(&lease.Spec)
	raw, err := json.Marshal(*r)
	if err != nil {
		return nil, nil, err
	}
	return r, raw, nil
}

// create writes a new Lease holding r.
func (l *lock) create(ctx context.Context, r LockRecord) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}, Spec: specOf(r)}
	res, err := l.client.Create(ctx, l.ann.apply(lease), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.lease = res
	l.ann.saw(res)
	return nil
}

// update writes r on the Lease as last read or written: the API server refuses it (a conflict) if anyone wrote it
// since.
func (l *lock) update(ctx context.Context, r LockRecord) error {
	if l.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	l.lease.Spec = specOf(r)
	res, err := l.client.Update(ctx, l.ann.apply(l.lease), metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = res
	l.ann.saw(res)
	return nil
}
