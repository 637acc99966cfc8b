package lease

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/kube"
)

// Info is what `status` says of a scheduler's Lease: it reads it (one GET) and never takes it.
type Info struct {
	Name string `json:"name"`
	// Holder is who holds it ("" when nobody does: never taken, or released).
	Holder string `json:"holder,omitempty"`
	// RenewTime is the holder's last renewal, by its clock; DurationSeconds how long it stays its holder's without one.
	RenewTime       *time.Time `json:"renewTime,omitempty"`
	DurationSeconds int32      `json:"durationSeconds,omitempty"`
	// Error says why it could not be read (a Role without get on leases: passes then run unserialised).
	Error string `json:"error,omitempty"`
}

// Describe reads the Lease of scheduler; a failure is in Info.Error, never an error of the report.
func Describe(ctx context.Context, client kube.CoordinationV1, namespace, scheduler string) Info {
	info := Info{Name: Name(scheduler)}
	l, err := client.Leases(namespace).Get(ctx, info.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return info
	case err != nil:
		info.Error = err.Error()
		return info
	}
	if h := l.Spec.HolderIdentity; h != nil {
		info.Holder = *h
	}
	if r := l.Spec.RenewTime; r != nil {
		t := r.UTC()
		info.RenewTime = &t
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		info.DurationSeconds = *d
	}
	return info
}

// String is the status line: who holds the Lease and since when it was renewed, as of now.
func (i Info) String(now time.Time) string {
	switch {
	case i.Error != "":
		return fmt.Sprintf("%s: cannot read it (%s)", i.Name, i.Error)
	case i.Holder == "":
		return fmt.Sprintf("%s: free (no pass creating)", i.Name)
	}
	s := fmt.Sprintf("%s: held by %s", i.Name, i.Holder) // anyone with update on leases writes it: outputs escape it
	if i.RenewTime != nil {
		ago := now.Sub(*i.RenewTime).Round(time.Second)
		s += fmt.Sprintf(", renewed %s ago", ago)
		if d := time.Duration(i.DurationSeconds) * time.Second; d > 0 && ago > d {
			s += fmt.Sprintf(" (longer than its %s: the next tick takes it over)", d)
		}
	}
	return s
}
