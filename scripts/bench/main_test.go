package main

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobsched/jobsched/pkg/config"
	"github.com/jobsched/jobsched/pkg/rows"
)

// TestWriteResults: the results file is the run's own: its date, commit, machine load and table, and the parts run.
func TestWriteResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	info := runInfo{date: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), commit: "0123456789ab-dirty", cpus: 2,
		loadBefore: "0.50", loadAfter: "1.75", only: "creates"}
	err := writeResults(path, info, []row{{what: "creates per second", jobsched: "120", reference: "100", ratio: "1.20", load: "1.10"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Bench results\n\nWritten by `scripts/bench.sh` (scripts/bench/main.go); do not edit by hand.\n\n" +
		"- date: 2026-12-01T10:00:00Z\n- commit: 0123456789ab-dirty\n" +
		"- machine: 2 CPU(s), load average (1 min) 0.50 at the start, 1.75 at the end\n- parts run: BENCH_ONLY=creates\n\n" +
		"| measure | jobsched | reference, same run | ratio | load avg (1 min) |\n|---|--:|--:|--:|--:|\n" +
		"| creates per second | 120 | 100 | 1.20 | 1.10 |\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("results file (-want +got):\n%s", diff)
	}
}

// TestBeforeStatement: the bench times the read's own statement, and rewrites its exclusion into the form it replaced.
func TestBeforeStatement(t *testing.T) {
	src, err := rows.OpenPostgres("host=127.0.0.1 dbname=none", config.Source{Key: "id", Query: "SELECT id FROM t ORDER BY id"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	now, args := src.SelectStatement(rows.Selection{Exclude: []string{"a", "b"}, Limit: 10})
	before := notIn.ReplaceAllString(now, "NOT ($1 = ANY($2))")
	if !strings.Contains(now, ` NOT IN (SELECT unnest($1::text[]))`) || len(args) != 3 {
		t.Fatalf("the read's statement %q (args %v) has no NOT IN over $1", now, args)
	}
	if want := strings.Replace(now, `jobsched_q."id"::text NOT IN (SELECT unnest($1::text[]))`, `NOT (jobsched_q."id"::text = ANY($1::text[]))`, 1); before != want {
		t.Errorf("before = %q, want %q", before, want)
	}
}

// TestCallKind: the counting proxy names a request by the API server's verb and resource.
func TestCallKind(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "/apis/batch/v1/namespaces/ns/jobs?limit=500", "list jobs"},
		{"GET", "/apis/batch/v1/namespaces/ns/jobs?watch=true&sendInitialEvents=true", "watch jobs"},
		{"GET", "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded", "list pods"},
		{"GET", "/api/v1/nodes", "list nodes"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/jobsched-x", "get leases"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/jobsched-x", "update leases"},
		{"POST", "/apis/batch/v1/namespaces/ns/jobs", "create jobs"},
		{"DELETE", "/apis/batch/v1/namespaces/ns/jobs/a", "delete jobs"},
		{"PATCH", "/apis/batch/v1/namespaces/ns/jobs/a/status", "patch jobs/status"},
		{"GET", "/version", "GET /version"},
	} {
		r := httptest.NewRequest(c.method, c.url, nil)
		if got := callKind(r); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.url, got, c.want)
		}
	}
}

// TestTallyMinus: a pass's counts are the later snapshot less the earlier one, kinds that did not grow left out.
func TestTallyMinus(t *testing.T) {
	before := tally{calls: map[string]int{"list pods": 1, "create jobs": 4}, bytes: 100}
	after := tally{calls: map[string]int{"list pods": 1, "create jobs": 6, "watch jobs": 1}, bytes: 350}
	got := after.minus(before)
	if want := (tally{calls: map[string]int{"create jobs": 2, "watch jobs": 1}, bytes: 250}); !reflect.DeepEqual(got, want) || got.total() != 3 {
		t.Errorf("minus = %+v (total %d), want %+v (total 3)", got, got.total(), want)
	}
}

// TestCell: a failure is one table cell: the log's escaped newlines and the real ones are spaces, a pipe cannot end
// the cell, and a long tail is cut.
func TestCell(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "newlines, escaped and real", in: `a\nb` + "\nc", want: "a b c"},
		{name: "a pipe", in: "x | y", want: "x / y"},
		{name: "long", in: strings.Repeat("é", 301), want: strings.Repeat("é", 300) + "…"},
	} {
		if got := cell(errors.New(tc.in)); got != tc.want {
			t.Errorf("%s: cell = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCPUStat pins the reading of /proc's CPU times: the machine's busy share leaves out idle and iowait, and a
// process's name may hold spaces and parentheses.
func TestCPUStat(t *testing.T) {
	busy, total, err := machineCPU("cpu  100 20 30 800 50 0 0 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil || busy != 1.5 || total != 10 {
		t.Errorf("machineCPU = %v, %v, %v; want 1.5, 10, nil", busy, total, err)
	}
	if _, _, err := machineCPU("intr 1 2 3\n"); err == nil {
		t.Error("machineCPU of no cpu line: no error")
	}
	comm, secs, ok := processCPU("4242 (kube (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 99 1 2")
	if !ok || comm != "kube (x) y" || secs != 3 {
		t.Errorf("processCPU = %q, %v, %v; want \"kube (x) y\", 3, true", comm, secs, ok)
	}
	if _, _, ok := processCPU("4242 (short) S 1 2"); ok {
		t.Error("processCPU of a short line: ok")
	}
	s0 := cpuSample{busy: 10, total: 20, parts: map[string]float64{"etcd": 1}}
	s1 := cpuSample{busy: 25, total: 40, parts: map[string]float64{"etcd": 4, "kwok": 2}}
	if got := s1.since(s0); !strings.HasPrefix(got, "machine 75% busy, kube-apiserver 0 s, etcd 3 s,") || !strings.Contains(got, "kwok 2 s") {
		t.Errorf("since = %q", got)
	}
}

// TestSettle: a throughput run begins once the machine's busy share stops falling (a window at most 5 points under
// the one before), or after settleMax while it still falls; each window is waited for, and a failed reading is an
// error.
func TestSettle(t *testing.T) {
	// reader gives the cumulative CPU seconds of 2 cores busy by each share in turn, one window of settleWindow each.
	reader := func(shares ...float64) func() (float64, float64, error) {
		busy, total, i := 0.0, 0.0, -1
		return func() (float64, float64, error) {
			if i >= 0 {
				if i >= len(shares) {
					return 0, 0, errors.New("read past the last window")
				}
				busy, total = busy+shares[i]*2*settleWindow.Seconds(), total+2*settleWindow.Seconds()
			}
			i++
			return busy, total, nil
		}
	}
	falling := make([]float64, int(settleMax/settleWindow))
	for i := range falling {
		falling[i] = 0.99 - 0.056*float64(i) // 5.6 points less each window
	}
	for _, c := range []struct {
		name   string
		shares []float64
		want   string
		slept  int
	}{
		{"falls, then stops falling", []float64{0.9, 0.6, 0.4, 0.38}, "began after 40.0 s settling (machine 38% busy over the last 10.0 s)", 4},
		{"steady from the start", []float64{0.3, 0.34}, "began after 20.0 s settling (machine 34% busy over the last 10.0 s)", 2},
		{"rises", []float64{0.3, 0.7}, "began after 20.0 s settling (machine 70% busy over the last 10.0 s)", 2},
		{"falls until the longest wait", falling, "began after 180.0 s settling (machine 4% busy over the last 10.0 s, still falling)", len(falling)},
	} {
		slept := 0
		got, err := settle(reader(c.shares...), func(d time.Duration) {
			if d != settleWindow {
				t.Errorf("%s: slept %v, want %v", c.name, d, settleWindow)
			}
			slept++
		})
		if err != nil || got != c.want || slept != c.slept {
			t.Errorf("%s: settle = %q, %v after %d windows; want %q after %d", c.name, got, err, slept, c.want, c.slept)
		}
	}
	if _, err := settle(reader(0.9), func(time.Duration) {}); err == nil {
		t.Error("settle with a reading that fails: no error")
	}
}

// TestTimedRSS: a run's peak RSS is its own, not the bench's. The bench holds 200 MB here; a small command run
// through timedCommand reads a few MB (os/exec's ru_maxrss for it reads the bench's 200 MB: rss.go).
func TestTimedRSS(t *testing.T) {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		t.Fatalf("the bench measures RSS with GNU time (apt-get install time): %v", err)
	}
	held := make([]byte, 200<<20)
	for i := range held {
		held[i] = 1
	}
	b := &bench{dir: t.TempDir()}
	c, err := b.timedCommand("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	mb, err := c.rssMB()
	if err != nil {
		t.Fatal(err)
	}
	if mb <= 0 || mb > 50 {
		t.Errorf("peak RSS of /bin/true through time = %.1f MB, want a few MB (the bench holds %d MB)", mb, len(held)>>20)
	}
	for _, c := range []struct {
		out  string
		want float64
	}{{"1024\n", 1.048576}, {"Command exited with non-zero status 1\n2048\n", 2.097152}} {
		if got, err := parseTimeRSS(c.out); err != nil || got != c.want {
			t.Errorf("parseTimeRSS(%q) = %v, %v; want %v", c.out, got, err, c.want)
		}
	}
	if _, err := parseTimeRSS(""); err == nil {
		t.Error("parseTimeRSS of nothing: no error")
	}
}

// TestBareReference: a fill is compared with the mean of the bare loops around it, and both are shown.
func TestBareReference(t *testing.T) {
	ref, ratio := bareReference(40, []float64{60, 40})
	if ratio != "0.80 of bare" || !strings.Contains(ref, "60 and 40 Jobs/s, mean 50") {
		t.Errorf("bareReference(40, [60 40]) = %q, %q; want the mean 50 and 0.80", ref, ratio)
	}
	if ref, ratio := bareReference(40, nil); ratio != "" || strings.Contains(ref, "bare") {
		t.Errorf("bareReference with no bare loop = %q, %q; want the target alone", ref, ratio)
	}
}

// TestThroughputRuns: one round is a bare loop, one queue, a bare loop, five queues, a bare loop; each round more
// adds a fill of each between bare loops.
func TestThroughputRuns(t *testing.T) {
	for _, rounds := range []int{0, 1, 2, 3} {
		runs := throughputRuns("bare", rounds, false)
		if want := 1 + 4*max(rounds, 1); len(runs) != want {
			t.Fatalf("rounds %d: %d runs, want %d", rounds, len(runs), want)
		}
		for i, r := range runs {
			if r.bare != (i%2 == 0) {
				t.Errorf("rounds %d: run %d (%q) bare = %v: every fill must have a bare loop on either side", rounds, i, r.what, r.bare)
			}
			round := (i + 3) / 4
			first := map[bool]int{true: 0, false: 5}[round%2 == 1] // round 1 one queue first, round 2 five, ...
			if want := map[int]int{1: first, 3: 5 - first}[i%4]; !r.bare && r.queues != want {
				t.Errorf("rounds %d: run %d (%q) has %d queues, want %d", rounds, i, r.what, r.queues, want)
			}
			if rounds > 1 && i > 0 && !strings.Contains(r.what, fmt.Sprintf("round %d", round)) {
				t.Errorf("rounds %d: run %d is %q: no round %d", rounds, i, r.what, round)
			}
			if i > 0 && r.bare && !strings.Contains(r.what, "after "+runs[i-1].what) {
				t.Errorf("rounds %d: run %d is %q, after %q", rounds, i, r.what, runs[i-1].what)
			}
		}
	}
}

// TestThroughputRunsPlain: with plain, each round begins with one pass without --fill-for, between bare loops, and
// still has both fills between bare loops.
func TestThroughputRunsPlain(t *testing.T) {
	runs := throughputRuns("bare", 2, true)
	if want := 1 + 2*6; len(runs) != want {
		t.Fatalf("%d runs, want %d: %v", len(runs), want, runs)
	}
	for i, r := range runs {
		if r.bare != (i%2 == 0) {
			t.Errorf("run %d (%q) bare = %v: every fill must have a bare loop on either side", i, r.what, r.bare)
		}
		if plain := i%6 == 1; r.plain != plain || (plain && r.key() != plainKey) {
			t.Errorf("run %d (%q) plain = %v, key %d: each round's first run is the pass without --fill-for", i, r.what, r.plain, r.key())
		}
	}
	if got := []int{runs[3].key(), runs[5].key(), runs[9].key(), runs[11].key()}; !slices.Equal(got, []int{0, 5, 5, 0}) {
		t.Errorf("the fills' queues: %v, want [0 5 5 0]", got)
	}
}

// TestRoundsMedians: a row per number of queues run more than once, with the median of its ratios.
func TestRoundsMedians(t *testing.T) {
	rows := roundsMedians("1,000 nodes", map[int][]float64{0: {0.9, 0.7, 0.8}, 5: {0.6, 1.0}, 2: {0.5}, plainKey: {1.0, 0.9}})
	if p := rows[0]; !strings.Contains(p.what, "one pass without --fill-for: the median over 2 rounds") || p.ratio != "0.95 of bare" {
		t.Errorf("the pass without --fill-for: %+v", p)
	}
	rows = rows[1:]
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (a queue count run once has none): %v", len(rows), rows)
	}
	if r := rows[0]; !strings.Contains(r.what, "one queue: the median over 3 rounds") || r.ratio != "0.80 of bare" || !strings.Contains(r.jobsched, "0.90, 0.70, 0.80") {
		t.Errorf("one queue: %+v", r)
	}
	if r := rows[1]; !strings.Contains(r.what, "5 queues: the median over 2 rounds") || r.ratio != "0.80 of bare" {
		t.Errorf("five queues: %+v", r)
	}
}

func TestGCTraceHeap(t *testing.T) {
	log := `{"level":"info","message":"pass done"}
gc 1 @0.013s 2%: 0.32+1.1+0.006 ms clock, 0.65+0.47/0.15/0.20+0.012 ms cpu, 2->2->0 MB, 2 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 595 @144.2s 1%: 0.1+2+0.01 ms clock, 0.2+0.1/1/0+0.02 ms cpu, 22->23->19 MB, 37 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 596 @144.9s 1%: 0.1+2+0.01 ms clock, 0.2+0.1/1/0+0.02 ms cpu, 21->20->17 MB, 23 MB goal, 0 MB stacks, 0 MB globals, 2 P`
	if got := gcTraceHeapMB(log); got != 23 {
		t.Errorf("gcTraceHeapMB = %v, want 23 (the largest heap before or after a collection, not the 37 MB goal)", got)
	}
	if got := gcTraceHeapMB(`{"message":"pass done"}`); got != 0 {
		t.Errorf("gcTraceHeapMB without a trace = %v, want 0", got)
	}
}

// TestAPIReadingSince: what the API server counted between two readings.
func TestAPIReadingSince(t *testing.T) {
	r0 := apiReading{reqs: map[string]float64{"LIST pods": 2, "WATCH pods": 1, "cluster-wide WATCH pods": 5}, closed: map[string]float64{"pods": 1}}
	r := apiReading{reqs: map[string]float64{"LIST pods": 5, "WATCH pods": 2, "cluster-wide WATCH pods": 8}, closed: map[string]float64{"pods": 3, "jobs": 1, "nodes": 0}}
	if got, want := r.since(r0), "API server meanwhile: watches closed as unresponsive: jobs 1, pods 2; pod LISTs 3, pod WATCHes ended 4"; got != want {
		t.Errorf("since = %q, want %q", got, want)
	}
	if got := r0.since(r0); !strings.Contains(got, "unresponsive: none;") {
		t.Errorf("no change: %q", got)
	}
}

// TestQuantiles: p50 is the middle row, p99 the row below the top 1% (the last of fewer than 100), max the last.
func TestQuantiles(t *testing.T) {
	if p50, p99, most := quantiles(nil); p50 != 0 || p99 != 0 || most != 0 {
		t.Errorf("quantiles(nil) = %v, %v, %v; want zeros", p50, p99, most)
	}
	var ds []time.Duration
	for i := 200; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p50, p99, most := quantiles(ds); p50 != 101*time.Millisecond || p99 != 199*time.Millisecond || most != 200*time.Millisecond {
		t.Errorf("quantiles(1..200 ms) = %v, %v, %v; want 101ms, 199ms, 200ms", p50, p99, most)
	}
	if p50, p99, most := quantiles([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}); p50 != 2*time.Second || p99 != 3*time.Second || most != 3*time.Second {
		t.Errorf("quantiles(3s, 1s, 2s) = %v, %v, %v; want 2s, 3s, 3s", p50, p99, most)
	}
}

// TestMixedBacklog: the mixed drain's rows in the query's order, three small then one large, and the large eight
// times the small in CPU and memory.
func TestMixedBacklog(t *testing.T) {
	s, l := sizesSmall, sizesLarge
	if diff := cmp.Diff([]taskSize{s, s, s, l, s, s, s, l, s, s}, mixedBacklog(10), cmp.AllowUnexported(taskSize{})); diff != "" {
		t.Errorf("mixedBacklog(10) (-want +got):\n%s", diff)
	}
	if small, large := s.amounts(), l.amounts(); large != (amounts{cpu: 8 * small.cpu, memory: 8 * small.memory}) {
		t.Errorf("large %+v, small %+v: want eight times", large, small)
	}
}

// TestMeanShares: each sample's requested and needed amounts over the allocatable, averaged; none without samples.
func TestMeanShares(t *testing.T) {
	alloc := amounts{cpu: 16000, memory: 32 << 30}
	samples := []sizesSample{
		{requested: amounts{cpu: 16000, memory: 32 << 30}, needed: amounts{cpu: 8000, memory: 16 << 30}},
		{requested: amounts{cpu: 8000, memory: 8 << 30}, needed: amounts{cpu: 2000, memory: 4 << 30}},
	}
	want := shares{samples: 2, cpu: 0.75, memory: 0.625, neededCPU: 0.3125, neededMemory: 0.3125}
	if diff := cmp.Diff(want, meanShares(samples, alloc), cmp.AllowUnexported(shares{})); diff != "" {
		t.Errorf("meanShares (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(shares{}, meanShares(nil, alloc), cmp.AllowUnexported(shares{})); diff != "" {
		t.Errorf("meanShares without samples (-want +got):\n%s", diff)
	}
}

// TestSizesTargets: the targets are judged on the figures: the ratio of the drains, A's shares (none
// without samples), Unschedulable pods and duplicates on either side.
func TestSizesTargets(t *testing.T) {
	good := sizesRun{drain: 60 * time.Second, shares: shares{samples: 10, cpu: 0.85, memory: 0.9}}
	ref := sizesRun{drain: 100 * time.Second, shares: shares{samples: 10, cpu: 1, memory: 1}}
	allMet := []sizesTarget{
		{what: "drain time, A / B", figure: "0.60", target: "≤ 0.6", met: true},
		{what: "A: mean share of the allocatable CPU requested while rows waited", figure: "85.0%", target: "≥ 85%", met: true},
		{what: "A: mean share of the allocatable memory requested while rows waited", figure: "90.0%", target: "≥ 85%", met: true},
		{what: "pods ever Unschedulable, A and B", figure: "0 and 0", target: "0", met: true},
		{what: "duplicate Jobs (more than one Job for a key), A and B", figure: "0 and 0", target: "0", met: true},
	}
	for _, c := range []struct {
		name string
		a, b sizesRun
		want func([]sizesTarget)
	}{
		{name: "all met", a: good, b: ref, want: func([]sizesTarget) {}},
		{name: "A slower than 0.6 of B", a: sizesRun{drain: 61 * time.Second, shares: good.shares}, b: ref, want: func(w []sizesTarget) {
			w[0].figure, w[0].met = "0.61", false
		}},
		{name: "B never drained", a: good, b: sizesRun{}, want: func(w []sizesTarget) {
			w[0].figure, w[0].met = "0.00", false
		}},
		{name: "A's CPU under 85%", a: sizesRun{drain: good.drain, shares: shares{samples: 10, cpu: 0.849, memory: 0.9}}, b: ref, want: func(w []sizesTarget) {
			w[1].figure, w[1].met = "84.9%", false
		}},
		{name: "no sample", a: sizesRun{drain: good.drain}, b: ref, want: func(w []sizesTarget) {
			w[1].figure, w[1].met, w[2].figure, w[2].met = "no sample", false, "no sample", false
		}},
		{name: "an Unschedulable pod on B", a: good, b: sizesRun{drain: ref.drain, unschedulable: 1}, want: func(w []sizesTarget) {
			w[3].figure, w[3].met = "0 and 1", false
		}},
		{name: "a duplicate on A", a: sizesRun{drain: good.drain, shares: good.shares, duplicates: 2}, b: ref, want: func(w []sizesTarget) {
			w[4].figure, w[4].met = "2 and 0", false
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := slices.Clone(allMet)
			c.want(want)
			if diff := cmp.Diff(want, sizesTargets("A", c.a, c.b), cmp.AllowUnexported(sizesTarget{})); diff != "" {
				t.Errorf("sizesTargets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSizesReport: the results file gives both sides with the ratio of their drains, and each target judged on them.
func TestSizesReport(t *testing.T) {
	set := sizesSetup{rows: 8, nodes: 2, dur: 15 * time.Second, every: time.Minute, fill: 50 * time.Second}
	a := sizesRun{what: "A", drain: 50 * time.Second, shares: shares{samples: 4, cpu: 0.9, memory: 0.8, neededCPU: 0.9, neededMemory: 0.8},
		created: 8, cron: cronRun{ticks: 1, invocations: []invocation{{passes: 3}}, load: "1.00"}}
	b := sizesRun{what: "B", drain: 100 * time.Second, shares: shares{samples: 9, cpu: 1, memory: 1, neededCPU: 0.3, neededMemory: 0.3},
		created: 9, duplicates: 1, cron: cronRun{ticks: 2, skipped: 1, load: "2.00"}}
	c := sizesRun{what: "C", drain: 40 * time.Second, shares: shares{samples: 4, cpu: 0.95, memory: 0.95, neededCPU: 0.95, neededMemory: 0.95},
		created: 8, cron: cronRun{ticks: 1, load: "1.00"}}
	if got := sizesReport("", set, a, b, sizesRun{}); strings.Contains(got, "drain time, C") {
		t.Errorf("a report without C judges C:\n%s", got)
	}
	got := sizesReport("", set, a, b, c)
	reportHas(t, got,
		"(6 small, 2 large)",
		"| A | 50 s | 0.50 | 90.0% | 80.0% | 90.0% | 80.0% | 4 | 1 (0) | 3 | 8 | 0 | 0 | 1.00 |\n",
		"| B | 100 s | 1.00 | 100.0% | 100.0% | 30.0% | 30.0% | 9 | 2 (1) | 0 | 9 | 1 | 0 | 2.00 |\n",
		"| drain time, A / B | 0.50 | ≤ 0.6 | met |\n",
		"| A: mean share of the allocatable CPU requested while rows waited | 90.0% | ≥ 85% | met |\n",
		"| A: mean share of the allocatable memory requested while rows waited | 80.0% | ≥ 85% | missed |\n",
		"| pods ever Unschedulable, A and B | 0 and 0 | 0 | met |\n",
		"| duplicate Jobs (more than one Job for a key), A and B | 0 and 1 | 0 | missed |\n",
		"| C | 40 s | 0.40 | 95.0% | 95.0% | 95.0% | 95.0% | 4 | 1 (0) | 0 | 8 | 0 | 0 | 1.00 |\n",
		"| drain time, C / B | 0.40 | ≤ 0.6 | met |\n",
		"| C: mean share of the allocatable CPU requested while rows waited | 95.0% | ≥ 85% | met |\n",
	)
}

// TestSizesRoundsReport: several rounds give each round's figures, and each target judged on the median of the
// rounds with every round's figure beside it; a duplicate in any round misses its target.
func TestSizesRoundsReport(t *testing.T) {
	set := sizesSetup{rows: 8, nodes: 2, dur: 15 * time.Second, every: time.Minute, fill: 50 * time.Second}
	run := func(what string, drain int, cpu float64, unschedulable, duplicates int) sizesRun {
		return sizesRun{what: what, drain: time.Duration(drain) * time.Second, shares: shares{samples: 4, cpu: cpu, memory: cpu},
			unschedulable: unschedulable, duplicates: duplicates, cron: cronRun{invocations: []invocation{{passes: 2}}, load: "1.00"}}
	}
	b := run("B", 100, 0.88, 0, 0)
	rounds := [][3]sizesRun{
		{run("A", 50, 0.60, 1, 0), b, run("C", 40, 0.80, 0, 0)},
		{run("A", 55, 0.62, 0, 0), b, run("C", 35, 0.90, 0, 0)},
		{run("A", 70, 0.58, 0, 0), b, run("C", 30, 0.86, 0, 1)},
	}
	got := sizesRoundsReport("", set, rounds)
	reportHas(t, got,
		"one side after the other, 3 rounds (A, B, C, A, B, C, …).",
		"| 2 | A | 55 s | 0.55 | 62.0% | 62.0% | 2 | 0 | 0 | 0 | 1.00 |\n",
		"| 3 | C | 30 s | 0.30 | 86.0% | 86.0% | 2 | 0 | 1 | 0 | 1.00 |\n",
		"| drain time, A / B | 0.55 | 0.50, 0.55, 0.70 | ≤ 0.6 | met |\n",
		"| A: mean share of the allocatable CPU requested while rows waited | 60.0% | 60.0%, 62.0%, 58.0% | ≥ 85% | missed |\n",
		"| pods ever Unschedulable, A and B | 0 | 1, 0, 0 | 0 | met |\n",
		"| C: mean share of the allocatable CPU requested while rows waited | 86.0% | 80.0%, 90.0%, 86.0% | ≥ 85% | met |\n",
		"| duplicate Jobs (more than one Job for a key), C and B, in any round | 0 | 0, 0, 1 | 0 | missed |\n",
		"C (round 3)",
	)
}

// reportHas fails t for each of wants that the report got does not contain.
func reportHas(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("the report has no %q:\n%s", want, got)
		}
	}
}
