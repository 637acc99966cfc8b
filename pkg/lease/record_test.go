package lease

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestRateRecord: the record is read as the Lease is taken, written by WriteRecord in a conditional update of the lock
// (the lock's later renewals and release keep it, and carry a settled value), and a Lease without it says so.
func TestRateRecord(t *testing.T) {
	ctx := context.Background()
	l := held("", 15) // released by its last holder, with a record
	l.Annotations = map[string]string{"k": "before", "other": "kept"}
	made := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	l.CreationTimestamp = metav1.NewTime(made) // the API server's; the record knows nothing from before it
	client := testkit.NewFake(l)
	cfg := Config{Client: client.CoordinationV1(), Namespace: "ns", Name: "jobsched-s", Holder: "me", Annotation: "k"}
	h, err := Acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, found := h.Record(); v != "before" || !found {
		t.Errorf("Record = %q, %v; want the value the Lease held", v, found)
	}
	if got := h.Created(); !got.Equal(made) {
		t.Errorf("Created = %v, want the Lease's creationTimestamp %v", got, made)
	}
	if _, _, got, err := ReadRecord(ctx, client.CoordinationV1(), "ns", "s", "k"); err != nil || !got.Equal(made) {
		t.Errorf("ReadRecord's created = %v, %v; want %v", got, err, made)
	}
	annotations := func() map[string]string {
		got, err := client.CoordinationV1().Leases("ns").Get(ctx, "jobsched-s", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Annotations
	}
	if err := h.WriteRecord(ctx, "reserved"); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a["k"] != "reserved" || a["other"] != "kept" {
		t.Errorf("after WriteRecord: %v", a)
	}
	h.SettleRecord("settled")
	if a := annotations(); a["k"] != "reserved" {
		t.Errorf("SettleRecord wrote at once: %v", a)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if a := annotations(); a["k"] != "settled" || a["other"] != "kept" {
		t.Errorf("after Release: %v, want the settled record", a)
	}
	if err := h.WriteRecord(ctx, "late"); err == nil {
		t.Error("WriteRecord after Release: nil error")
	}

	fresh := testkit.NewFake()
	cfg.Client = fresh.CoordinationV1()
	h, err = Acquire(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if v, found := h.Record(); v != "" || found {
		t.Errorf("a new Lease: Record = %q, %v", v, found)
	}
	if v, found, _, err := ReadRecord(ctx, fresh.CoordinationV1(), "ns", "s", "k"); err != nil || found || v != "" {
		t.Errorf("ReadRecord of a Lease without it = %q, %v, %v", v, found, err)
	}
}
