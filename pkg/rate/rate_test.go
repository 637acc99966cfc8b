package rate

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

func TestWindow(t *testing.T) {
	l := Limit{Creates: 3, Per: time.Minute}
	w := NewWindow(l)
	w.Add(t0, 1)
	w.Add(t0.Add(12*time.Second), 2) // 12s is a whole number of 60ms ticks
	cases := []struct {
		name    string
		at      time.Duration
		allowed int
		next    time.Duration
	}{
		{"full", 20 * time.Second, 0, time.Minute},
		{"just before the first leaves", time.Minute - time.Millisecond, 0, time.Minute},
		{"the first left", time.Minute, 1, time.Minute},
		{"two more left", 72 * time.Second, 3, 72 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := t0.Add(c.at)
			if got := w.Allowed(now, l); got != c.allowed {
				t.Errorf("Allowed = %d, want %d", got, c.allowed)
			}
			if got := w.Next(now, l); !got.Equal(t0.Add(c.next)) {
				t.Errorf("Next = %s, want %s", got.Sub(t0), c.next)
			}
		})
	}
}

func TestAddRoundsUp(t *testing.T) {
	l := Limit{Creates: 1, Per: time.Minute} // tick 60ms
	w := NewWindow(l)
	w.Add(t0.Add(time.Millisecond), 1)
	if got, want := w.Next(t0, l), t0.Add(60*time.Millisecond+time.Minute); !got.Equal(want) {
		t.Errorf("Next = %s, want %s: a time is counted as if it were the end of its tick", got, want)
	}
	w = NewWindow(Limit{Creates: 1, Per: time.Second}) // tick 1ms
	w.Add(t0.Add(time.Microsecond), 1)
	if got := w.Encode(); got != "1:"+strconv.FormatInt(t0.UnixMilli()+1, 10) {
		t.Errorf("Encode = %q: a sub-millisecond time rounds up", got)
	}
}

func TestPrune(t *testing.T) {
	l := Limit{Creates: 3, Per: time.Minute}
	w := NewWindow(l)
	w.Add(t0, 2)                     // out of the window at t0+1m
	w.Add(t0.Add(30*time.Second), 2) // kept, one of them dropped: only the newest 3 matter
	w.Add(t0.Add(40*time.Second), 1) // kept
	now := t0.Add(time.Minute)
	before := w.Allowed(now, l)
	nextBefore := w.Next(now, l)
	w.Prune(now, l)
	if got := w.Count(now, l.Per); got != 3 {
		t.Errorf("after Prune Count = %d, want 3", got)
	}
	if w.Allowed(now, l) != before || !w.Next(now, l).Equal(nextBefore) {
		t.Errorf("Prune changed the answer: allowed %d→%d, next %s→%s", before, w.Allowed(now, l), nextBefore, w.Next(now, l))
	}
	if len(w.slots) != 2 || w.slots[0].n != 2 {
		t.Errorf("slots = %v, want the time at 30s with 2 creates and the one at 40s", w.slots)
	}
}

func TestEncodeDecode(t *testing.T) {
	l := Limit{Creates: 1000, Per: time.Minute}
	w := NewWindow(l)
	w.Add(t0, 1)
	w.Add(t0.Add(time.Second), 5)
	w.Add(t0.Add(90*time.Second), 1)
	text := w.Encode()
	want := "60:" + strconv.FormatInt(t0.UnixMilli()/60, 10) + ",17*5,1483"
	if text != want {
		t.Fatalf("Encode = %q, want %q", text, want)
	}
	back, err := Decode(text)
	if err != nil {
		t.Fatal(err)
	}
	if back.tick != w.tick || !slices.Equal(back.slots, w.slots) {
		t.Errorf("Decode(Encode) = %v, want %v", back, w)
	}
	for _, bad := range []string{"", "60", "0:1", "x:1", "60:", "60:1,0", "60:1,-1", "60:-1", "60:1*1", "60:1*x",
		"60:1*99999999999999", "60:9223372036854775807"} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) = nil error", bad)
		}
	}
}

// TestMaxWindowBytes: the bound holds for the largest windows, of every count up to its cap.
func TestMaxWindowBytes(t *testing.T) {
	for _, l := range []Limit{{1, time.Second}, {30, time.Minute}, {1000, time.Second}, {1_000_000, 24 * time.Hour}, {5000, time.Hour}} {
		w := NewWindow(l)
		tick := TickOf(l.Per)
		// The worst: the newest creates, spread one tick apart, the last time holding what is left.
		for i := range min(l.Creates, ticks+1) - 1 {
			w.Add(t0.Add(time.Duration(i)*tick), 1)
		}
		w.Add(t0.Add(time.Duration(ticks)*tick), max(l.Creates-ticks, 1))
		w.Prune(t0.Add(time.Duration(ticks)*tick), l)
		if got, bound := len(w.Encode()), MaxWindowBytes(l); got > bound {
			t.Errorf("%s: encoded %d bytes, more than the bound %d", l, got, bound)
		}
	}
}

func TestRecord(t *testing.T) {
	l := Limit{Creates: 10, Per: time.Minute}
	r := &Record{}
	for scope, at := range map[string]time.Duration{ScopeInstall: 0, QueueScope("a"): time.Second, GroupScope("a", "tenant-1"): 2 * time.Second} {
		w := NewWindow(l)
		w.Add(t0.Add(at), 2)
		r.Set(scope, w)
	}
	text, dropped, err := r.Encode(MaxRecordBytes)
	if err != nil || dropped != nil {
		t.Fatalf("Encode: %v, dropped %v", err, dropped)
	}
	back, err := DecodeRecord(text)
	if err != nil {
		t.Fatal(err)
	}
	if again, _, _ := back.Encode(MaxRecordBytes); again != text {
		t.Errorf("DecodeRecord(Encode) encodes as %s, want %s", again, text)
	}
	// A budget that holds the install's and the queue's windows only drops the group's, says so, and holds the
	// left-out window in its stead (its creates at its latest time).
	small := len(text) + 40
	text2, dropped, err := r.Encode(small)
	if err != nil || !slices.Equal(dropped, []string{GroupScope("a", "tenant-1")}) || len(text2) > small {
		t.Errorf("Encode(%d) = %d bytes, dropped %v, %v", small, len(text2), dropped, err)
	}
	if back, err := DecodeRecord(text2); err != nil || back.Window(GroupScope("a", "tenant-1")) != nil ||
		!back.Window("group/a/#left-out").Last().Equal(r.Window(GroupScope("a", "tenant-1")).Last()) {
		t.Errorf("the record without the group: %s (%v)", text2, err)
	}
	if _, _, err := r.Encode(20); err == nil {
		t.Error("Encode with no room for the install's window: nil error")
	}
	for _, bad := range []string{"", "{}", `{"v":2,"windows":{}}`, `{"v":1,"windows":{"install":"x"}}`, `{"v":1,"windows":{},"more":1}`} {
		if _, err := DecodeRecord(bad); err == nil {
			t.Errorf("DecodeRecord(%q) = nil error", bad)
		}
	}
}

// TestNeverOverRate is the property the record exists for: passes at any times, each creating what the window
// allows at times after it reserved them (the reservation written first, at the time the creates must have landed
// by; the settled record written after, at the time they did), some killed between the two, never put more than N
// creates in any window of length per. The record goes through its text between passes, as through the Lease.
func TestNeverOverRate(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := Limit{Creates: 1 + rng.IntN(12), Per: time.Duration(1+rng.IntN(60)) * time.Second}
		const scope = ScopeInstall
		text := ""
		now := t0
		var created []time.Time
		for range 200 {
			now = now.Add(time.Duration(rng.Int64N(int64(l.Per / 2))))
			rec, err := DecodeRecord(text)
			if text == "" {
				rec, err = &Record{}, nil
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			w := rec.Window(scope)
			if w == nil {
				w = NewWindow(l)
			}
			w.Prune(now, l)
			k := rng.IntN(w.Allowed(now, l) + 1)
			if k == 0 {
				continue
			}
			reserveFor := time.Duration(1+rng.IntN(5000)) * time.Millisecond // the creates' deadline
			reserved := rec.Clone()
			rw := &Window{tick: w.tick, slots: slices.Clone(w.slots)}
			rw.Add(now.Add(reserveFor), k)
			reserved.Set(scope, rw)
			text, _, _ = reserved.Encode(MaxRecordBytes)
			made, last := 0, now
			for range k {
				if rng.IntN(10) == 0 {
					break // killed, or the deadline: the rest is not created
				}
				last = last.Add(time.Duration(rng.Int64N(int64(now.Add(reserveFor).Sub(last)) + 1)))
				created = append(created, last)
				made++
			}
			if rng.IntN(4) == 0 {
				continue // killed before the settled record is written: the reservation stays
			}
			settled := rec.Clone()
			sw := &Window{tick: w.tick, slots: slices.Clone(w.slots)}
			sw.Add(last, made)
			settled.Set(scope, sw)
			text, _, _ = settled.Encode(MaxRecordBytes)
			now = last
		}
		slices.SortFunc(created, time.Time.Compare)
		for i := range created {
			j := i
			for j < len(created) && created[j].Sub(created[i]) < l.Per {
				j++
			}
			if j-i > l.Creates {
				t.Fatalf("seed %d (%s): %d creates within %s from %s", seed, l, j-i, l.Per, created[i].Sub(t0))
			}
		}
	}
}
