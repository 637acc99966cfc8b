package cmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobsched/jobsched/pkg/lease"
	"github.com/jobsched/jobsched/pkg/listen"
	"github.com/jobsched/jobsched/pkg/scheduler"
	"github.com/jobsched/jobsched/pkg/testkit"
)

// TestFiller: which pass follows which, and why the invocation ends. Each case scripts the passes and what each wait
// returns; the clock is the test's (a wait may move it).
func TestFiller(t *testing.T) {
	room := fillPass{room: true, rowsWait: true, limit: "limits.maxActive: 4 of 4 unfinished"}
	fit := fillPass{room: true, nodes: true, rowsWait: true, limit: "capacity: 2 fit"}
	failed := errors.New("the database is down")
	type wait struct {
		advance time.Duration // the clock moves this much during the wait
		err     error         // what the wait returns; block: until its context ends
		block   bool
		poll    bool   // until its context ends, which the filler's poll ends first
		name    string // what ended it (Follow.Wait's name), when not err; "": a Job's
	}
	tests := []struct {
		name       string
		passes     []fillPass
		waits      []wait
		terminate  bool // SIGTERM during the first wait
		wantPasses int
		wantReason string
		wantErr    error
		wantWaits  []string // the pass (refill) after which each wait came, " nodes" when it may wake on a node, " binds" on a bind, " ends" on a pod's end
		wantWoke   []string // what each refill's pass was told woke it (nil: not checked)
		poll       time.Duration
	}{
		{name: "a cancel query: the poll runs the next pass although no Job ended", poll: time.Millisecond,
			passes: []fillPass{room, {room: true}}, waits: []wait{{poll: true}},
			wantPasses: 2, wantReason: endBacklogEmpty, wantWaits: []string{"0"}},
		{name: "the backlog is empty", passes: []fillPass{{room: true, limit: "capacity: 2 fit"}},
			wantPasses: 1, wantReason: endBacklogEmpty},
		{name: "blocked by an Unschedulable pod", passes: []fillPass{{blocked: "1 pod(s) Unschedulable", rowsWait: true}},
			wantPasses: 1, wantReason: endBlocked + "1 pod(s) Unschedulable"},
		{name: "bound by maxPerTick, not by room", passes: []fillPass{{rowsWait: true, limit: "limits.maxPerTick: 10"}},
			wantPasses: 1, wantReason: endNotRoom + "limits.maxPerTick: 10"},
		{name: "the pass failed", passes: []fillPass{{err: failed, room: true, rowsWait: true}},
			wantPasses: 1, wantReason: endFailed, wantErr: failed},
		{name: "a Job ends: the next pass, until the backlog is empty", passes: []fillPass{room, room, {room: true}},
			waits: []wait{{advance: 20 * time.Second}, {advance: 20 * time.Second}}, wantPasses: 3, wantReason: endBacklogEmpty, wantWaits: []string{"0", "1"}},
		{name: "bound by the capacity fit: the wait may wake on a node, and after a pass bound by maxActive not",
			passes: []fillPass{fit, room, {room: true}}, waits: []wait{{}, {}}, wantPasses: 3, wantReason: endBacklogEmpty, wantWaits: []string{"0 nodes", "1"}},
		{name: "the fit awaits our pods of other sizes: the wait may wake on their bind too",
			passes: []fillPass{{room: true, nodes: true, binds: true, rowsWait: true}, {room: true}}, waits: []wait{{}},
			wantPasses: 2, wantReason: endBacklogEmpty, wantWaits: []string{"0 nodes binds"}},
		{name: "the fit bound it and a pod's end frees its room: the wait may wake on one, and the next pass says so",
			passes: []fillPass{{room: true, nodes: true, ends: true, rowsWait: true}, fit, {room: true}},
			waits:  []wait{{name: "left/n1"}, {name: "pod/n1"}}, wantPasses: 3, wantReason: endBacklogEmpty,
			wantWaits: []string{"0 nodes ends", "1 nodes"}, wantWoke: []string{"podEnd", "podBound"}},
		{name: "the refill fails: its error is the invocation's", passes: []fillPass{room, {err: failed}},
			waits: []wait{{}}, wantPasses: 2, wantReason: endFailed, wantErr: failed, wantWaits: []string{"0"}},
		{name: "an expired resourceVersion: the next pass at once", passes: []fillPass{room, {room: true}},
			waits: []wait{{err: fmt.Errorf("watching: %w", scheduler.ErrLost)}}, wantPasses: 2, wantReason: endBacklogEmpty, wantWaits: []string{"0"}},
		{name: "the wait fails otherwise: the end", passes: []fillPass{room},
			waits: []wait{{err: errors.New("forbidden")}}, wantPasses: 1, wantReason: endCannotWait + "forbidden", wantWaits: []string{"0"}},
		{name: "no Job ends within --fill-for", passes: []fillPass{room},
			waits: []wait{{block: true}}, wantPasses: 1, wantReason: endTime, wantWaits: []string{"0"}},
		{name: "a Job ends after --fill-for: no pass is started", passes: []fillPass{room},
			waits: []wait{{advance: time.Minute}}, wantPasses: 1, wantReason: endTime, wantWaits: []string{"0"}},
		{name: "a pod's wait for the autoscaler's word ends: the next pass, although no Job ended",
			passes: []fillPass{{room: true, rowsWait: true, waitDue: time.Date(2026, 12, 1, 10, 0, 0, int(time.Millisecond), time.UTC)}, {blocked: "1 pod(s) Unschedulable", rowsWait: true}},
			waits:  []wait{{poll: true}}, wantPasses: 2, wantReason: endBlocked + "1 pod(s) Unschedulable", wantWaits: []string{"0"}},
		{name: "SIGTERM during the wait", passes: []fillPass{room}, terminate: true,
			waits: []wait{{block: true}}, wantPasses: 1, wantReason: endTerminated, wantWaits: []string{"0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			ctx, cancel := context.WithCancel(log.WithContext(context.Background()))
			defer cancel()
			now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			var refills []int
			var waits, woken []string
			f := filler{
				fillFor: 50 * time.Second,
				poll:    func() time.Duration { return tt.poll },
				now:     func() time.Time { return now },
				pass: func(_ context.Context, refill int, woke string) fillPass {
					if refill > 0 {
						woken = append(woken, woke)
					}
					refills = append(refills, refill)
					if len(refills) > len(tt.passes) {
						t.Fatalf("pass %d: the script has %d", len(refills), len(tt.passes))
					}
					return tt.passes[len(refills)-1]
				},
				wait: func(wctx context.Context, on scheduler.WakeOn) (string, error) {
					waits = append(waits, fmt.Sprint(refills[len(refills)-1]))
					if on.Nodes {
						waits[len(waits)-1] += " nodes"
					}
					if on.Binds {
						waits[len(waits)-1] += " binds"
					}
					if on.Ends {
						waits[len(waits)-1] += " ends"
					}
					w := tt.waits[len(waits)-1]
					now = now.Add(w.advance)
					if tt.terminate {
						cancel()
					}
					if w.poll {
						<-wctx.Done()
						return "", context.Cause(wctx)
					}
					if w.block {
						if tt.terminate {
							<-wctx.Done()
							return "", context.Cause(wctx)
						}
						// The deadline is the rest of --fill-for on the test's clock: let it pass at once.
						now = now.Add(time.Hour)
						return "", errFillOver
					}
					return cmp.Or(w.name, "job-a"), w.err
				},
			}
			err := f.run(ctx)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if len(refills) != tt.wantPasses {
				t.Errorf("%d passes, want %d", len(refills), tt.wantPasses)
			}
			for i, r := range refills {
				if r != i {
					t.Errorf("pass %d ran as refill %d", i, r)
				}
			}
			if strings.Join(waits, ",") != strings.Join(tt.wantWaits, ",") {
				t.Errorf("waits after passes %v, want %v", waits, tt.wantWaits)
			}
			if tt.wantWoke != nil && !slices.Equal(woken, tt.wantWoke) {
				t.Errorf("refills woken by %q, want %q", woken, tt.wantWoke)
			}
			var end struct {
				Reason string `json:"reason"`
				Passes int    `json:"passes"`
			}
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, `"message":"fill ended"`) {
					if err := json.Unmarshal([]byte(line), &end); err != nil {
						t.Fatal(err)
					}
				}
			}
			if end.Reason != tt.wantReason || end.Passes != tt.wantPasses {
				t.Errorf("fill ended with reason %q after %d passes, want %q after %d:\n%s", end.Reason, end.Passes, tt.wantReason, tt.wantPasses, logs.String())
			}
		})
	}
}

// TestFillerDeadline: the wait's context ends when --fill-for has passed on the real clock, with errFillOver as
// its cause, and the invocation ends there.
func TestFillerDeadline(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	passes := 0
	f := filler{fillFor: 50 * time.Millisecond, now: time.Now,
		pass: func(context.Context, int, string) fillPass {
			passes++
			return fillPass{room: true, rowsWait: true}
		},
		wait: func(ctx context.Context, _ scheduler.WakeOn) (string, error) {
			<-ctx.Done()
			return "", context.Cause(ctx)
		},
	}
	if err := f.run(log.WithContext(context.Background())); err != nil || passes != 1 {
		t.Fatalf("error %v after %d passes, want none after 1", err, passes)
	}
	if !strings.Contains(logs.String(), `"reason":"`+endTime+`"`) {
		t.Errorf("the end is not %q:\n%s", endTime, logs.String())
	}
}

// TestFillerRateWindow: a pass bound by limits.rate is followed by the next once its window allows a create: on
// the timer alone when nothing else bound it, or on the first of the timer and a Job's end when room bound it too.
func TestFillerRateWindow(t *testing.T) {
	for _, room := range []bool{false, true} {
		t.Run(fmt.Sprintf("room %v", room), func(t *testing.T) {
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			passes, waits := 0, 0
			var next time.Time
			f := filler{fillFor: time.Minute, now: time.Now,
				pass: func(context.Context, int, string) fillPass {
					passes++
					if passes == 2 {
						if now := time.Now(); now.Before(next) {
							t.Errorf("the second pass ran %s before the window opened", next.Sub(now))
						}
						return fillPass{room: true} // the backlog is empty
					}
					next = time.Now().Add(50 * time.Millisecond)
					return fillPass{room: room, rowsWait: true, limit: "limits.rate: 2 per 1m, next create at 10:00:01", next: next}
				},
				wait: func(ctx context.Context, _ scheduler.WakeOn) (string, error) {
					waits++
					<-ctx.Done() // no Job ends
					return "", context.Cause(ctx)
				},
			}
			if err := f.run(log.WithContext(context.Background())); err != nil || passes != 2 {
				t.Fatalf("error %v after %d passes, want none after 2:\n%s", err, passes, logs.String())
			}
			if want := map[bool]int{false: 0, true: 1}[room]; waits != want {
				t.Errorf("%d waits for a Job's end, want %d", waits, want)
			}
			if !strings.Contains(logs.String(), `"reason":"`+endBacklogEmpty+`"`) {
				t.Errorf("the end is not %q:\n%s", endBacklogEmpty, logs.String())
			}
		})
	}
}

// TestKeepLease: a fill run keeps the Lease while Jobs end within the idle time, and gives it up when none does,
// waiting on after that for the Job that ends.
func TestKeepLease(t *testing.T) {
	for _, tc := range []struct {
		name       string
		endsAt     int  // the wait call (0, 1, …) at which a Job ends; the ones before wait until their context ends
		nodes      bool // whether a node may wake the wait: passed on to each call
		wantHolder string
	}{
		{name: "a Job ends within the idle time: kept", endsAt: 0, nodes: true, wantHolder: "me"},
		{name: "none does: given up, then the wait goes on", endsAt: 1, wantHolder: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := testkit.NewFake()
			g := &lease.Guard{Client: client.CoordinationV1(), Namespace: "ns", Scheduler: "s", Holder: "me", Keep: true}
			if _, release, err := g.Take(context.Background()); err != nil {
				t.Fatal(err)
			} else {
				release()
			}
			calls := 0
			wait := func(ctx context.Context, on scheduler.WakeOn) (string, error) {
				calls++
				if on != (scheduler.WakeOn{Nodes: tc.nodes}) {
					t.Errorf("wait call %d: %+v, want nodes %v (passed on as given)", calls, on, tc.nodes)
				}
				if calls-1 < tc.endsAt {
					<-ctx.Done()
					return "", context.Cause(ctx)
				}
				return "job-1", nil
			}
			name, err := keepLease(g, wait, time.Millisecond)(context.Background(), scheduler.WakeOn{Nodes: tc.nodes})
			l, gerr := client.CoordinationV1().Leases("ns").Get(context.Background(), lease.Name("s"), metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			if name != "job-1" || err != nil || *l.Spec.HolderIdentity != tc.wantHolder {
				t.Errorf("wait = %q, %v; holder %q; want job-1, no error, holder %q", name, err, *l.Spec.HolderIdentity, tc.wantHolder)
			}
		})
	}
}

// TestFillerCover: with source.notify or source.poll a run covers its whole --fill-for: a pass that leaves nothing
// to wait for is followed by an idle wait (not the end), which a notification, the poll or a Job's end ends; the
// next pass's woke says which; notifications during a pass are one more pass; only the time, a failed pass or a
// signal end the run.
func TestFillerCover(t *testing.T) {
	empty := fillPass{room: true, limit: "capacity: 2 fit"}
	room := fillPass{room: true, rowsWait: true, limit: "limits.maxActive: 4 of 4 unfinished"}
	failed := errors.New("the database is down")
	// What each wait does: notify (a notification arrives while it waits), storm (a thousand arrive during the
	// pass before it), poll (nothing: the poll ends it), job (a Job ends), time (--fill-for passes), end (the wait's
	// deadline, and the clock is then past --fill-for), term (SIGTERM).
	tests := []struct {
		name       string
		passes     []fillPass
		waits      []string
		poll       time.Duration
		fillFor    time.Duration // 50 s if 0
		wantWoke   []string      // each pass's woke
		wantWaits  string        // "idle" or "wait" per wait
		wantReason string
		wantErr    error
	}{
		{name: "the backlog is empty: the run idles, a notification starts the next pass",
			passes: []fillPass{empty, empty}, waits: []string{"notify", "time"},
			wantWoke: []string{"", listen.WokeNotify}, wantWaits: "idle,idle", wantReason: endTime},
		{name: "the poll starts the next pass", poll: time.Millisecond,
			passes: []fillPass{empty, empty}, waits: []string{"poll", "time"},
			wantWoke: []string{"", wokePoll}, wantWaits: "idle,idle", wantReason: endTime},
		{name: "with the poll, the window's end is its last pass", poll: time.Hour, fillFor: time.Millisecond,
			passes: []fillPass{empty, empty}, waits: []string{"end"},
			wantWoke: []string{"", wokePoll}, wantWaits: "idle", wantReason: endTime},
		{name: "without the poll, the window's end ends the run", fillFor: time.Millisecond,
			passes: []fillPass{empty}, waits: []string{"end"},
			wantWoke: []string{""}, wantWaits: "idle", wantReason: endTime},
		{name: "a Job's end starts the next pass while it idles",
			passes: []fillPass{empty, empty}, waits: []string{"job", "time"},
			wantWoke: []string{"", wokeJob}, wantWaits: "idle,idle", wantReason: endTime},
		{name: "a storm during a pass is one more pass",
			passes: []fillPass{empty, empty, empty}, waits: []string{"storm", "time"},
			wantWoke: []string{"", listen.WokeNotify}, wantWaits: "idle,idle", wantReason: endTime},
		{name: "bound by room: it waits for a Job, and a notification ends that wait too",
			passes: []fillPass{room, empty}, waits: []string{"notify", "time"},
			wantWoke: []string{"", listen.WokeNotify}, wantWaits: "wait,idle", wantReason: endTime},
		{name: "blocked, or bound by maxPerTick: it idles",
			passes: []fillPass{{blocked: "1 pod(s) Unschedulable", rowsWait: true}, {rowsWait: true, limit: "limits.maxPerTick: 10"}},
			waits:  []string{"job", "time"}, wantWoke: []string{"", wokeJob}, wantWaits: "idle,idle", wantReason: endTime},
		{name: "a failed pass ends it", passes: []fillPass{empty, {err: failed}}, waits: []string{"notify"},
			wantWoke: []string{"", listen.WokeNotify}, wantWaits: "idle", wantReason: endFailed, wantErr: failed},
		{name: "SIGTERM while it idles", passes: []fillPass{empty}, waits: []string{"term"},
			wantWoke: []string{""}, wantWaits: "idle", wantReason: endTerminated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			ctx, cancel := context.WithCancel(log.WithContext(context.Background()))
			defer cancel()
			now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			wake := make(chan string, 1)
			notify := func() {
				select {
				case wake <- listen.WokeNotify:
				default:
				}
			}
			var woke, waits []string
			step := func(wctx context.Context) (string, error) {
				switch tt.waits[len(waits)-1] {
				case "notify":
					notify()
				case "job":
					return "job-a", nil
				case "time":
					now = now.Add(time.Hour)
					return "", errFillOver
				case "end":
					<-wctx.Done()
					now = now.Add(time.Hour)
					return "", context.Cause(wctx)
				case "term":
					cancel()
				}
				<-wctx.Done()
				return "", context.Cause(wctx)
			}
			f := filler{fillFor: cmp.Or(tt.fillFor, 50*time.Second), cover: true, wake: wake,
				poll: func() time.Duration { return tt.poll },
				now:  func() time.Time { return now },
				pass: func(_ context.Context, refill int, w string) fillPass {
					woke = append(woke, w)
					if len(woke) > len(tt.passes) {
						t.Fatalf("pass %d: the script has %d", len(woke), len(tt.passes))
					}
					if len(waits) < len(tt.waits) && tt.waits[len(waits)] == "storm" {
						for range 1000 {
							notify()
						}
					}
					return tt.passes[len(woke)-1]
				},
				wait: func(wctx context.Context, _ scheduler.WakeOn) (string, error) {
					waits = append(waits, "wait")
					return step(wctx)
				},
				idle: func(wctx context.Context, _ scheduler.WakeOn) (string, error) {
					waits = append(waits, "idle")
					if tt.waits[len(waits)-1] == "storm" {
						<-wctx.Done() // the pending wake ends it at once
						return "", context.Cause(wctx)
					}
					return step(wctx)
				},
			}
			err := f.run(ctx)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if strings.Join(woke, ",") != strings.Join(tt.wantWoke, ",") {
				t.Errorf("passes woken by %q, want %q", woke, tt.wantWoke)
			}
			if strings.Join(waits, ",") != tt.wantWaits {
				t.Errorf("waits %s, want %s", strings.Join(waits, ","), tt.wantWaits)
			}
			if want := `"reason":"` + tt.wantReason + `"`; !strings.Contains(logs.String(), want) {
				t.Errorf("the end is not %q:\n%s", tt.wantReason, logs.String())
			}
		})
	}
}

// TestFillerFlood: however fast notifications come (one during every pass), a pass woken by one starts no sooner than
// minWake after the one before started.
func TestFillerFlood(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	wake := make(chan string, 1)
	var starts []time.Time
	f := filler{fillFor: 100 * time.Millisecond, cover: true, wake: wake, minWake: 20 * time.Millisecond, now: time.Now,
		poll: func() time.Duration { return 0 },
		pass: func(_ context.Context, _ int, woke string) fillPass {
			if len(starts) > 0 && woke != listen.WokeNotify {
				t.Errorf("pass %d woken by %q, want %q", len(starts), woke, listen.WokeNotify)
			}
			starts = append(starts, time.Now())
			select {
			case wake <- listen.WokeNotify:
			default:
			}
			return fillPass{room: true}
		},
		idle: func(ctx context.Context, _ scheduler.WakeOn) (string, error) {
			<-ctx.Done()
			return "", context.Cause(ctx)
		},
	}
	if err := f.run(log.WithContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < f.minWake {
			t.Errorf("pass %d started %s after the one before, want at least %s", i, d, f.minWake)
		}
	}
	if len(starts) < 2 {
		t.Errorf("%d passes, want the notifications to start more", len(starts))
	}
}
