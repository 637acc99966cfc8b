package cmd

// The printers of status and dry-run: the documents (-o json|yaml, streamed item by item) and the text tables.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/capacity"
	"github.com/jobsched/jobsched/pkg/report"
	"github.com/jobsched/jobsched/pkg/scheduler"
)

// jobList is the planned Jobs as a v1 List, which `kubectl apply --dry-run=server -f -` and `kubectl create -f -` take.
type jobList struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Items      []*batchv1.Job `json:"items"`
}

// planKind is the kind of the document dry-run -o json|yaml prints.
const planKind = "Plan"

// planDocument is the document dry-run -o json|yaml prints: the plan's fields under an apiVersion (that of status's
// documents) and a kind, so that a reader of a saved document can tell what it is and which version wrote it.
type planDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// NotKnown is what the creates depend on that only making them tells (scheduler.Plan.NotKnown).
	NotKnown []string `json:"notKnown,omitempty"`
	*scheduler.Plan
}

func newPlanDocument(p *scheduler.Plan) *planDocument {
	return &planDocument{APIVersion: report.StatusAPIVersion, Kind: planKind, NotKnown: p.NotKnown(), Plan: p}
}

func printPlan(out io.Writer, format string, p *scheduler.Plan) error {
	switch format {
	case "jobs":
		list := jobList{APIVersion: "v1", Kind: "List", Items: []*batchv1.Job{}}
		for _, c := range p.Creates {
			list.Items = append(list.Items, c.Job)
		}
		return printDoc(out, "yaml", list)
	case "json", "yaml":
		plan := *p
		plan.Jobs = nil // written one at a time
		return printDocWith(out, format, newPlanDocument(&plan), "jobs", p.Jobs)
	}
	fmt.Fprintf(out, "Scheduler %s in namespace %s: %d unfinished, slots %d (%s)\n", p.Scheduler, p.Namespace, p.Unfinished, p.Slots,
		printable(bound("bound by ", p.Limit, p.Blocked, p.Slots)))
	if p.Blocked != "" {
		fmt.Fprintf(out, "Blocked: %s\n", printable(p.Blocked))
	}
	printQuery(out, p.Query)
	if len(p.Queues) == 0 {
		if err := printReportLines(out, p.Capacity); err != nil {
			return err
		}
		if err := printActions(out, p, ""); err != nil {
			return err
		}
		printNotKnown(out, p)
		return nil
	}
	for _, q := range p.Queues {
		fmt.Fprintf(out, "\nQueue %s (priority %d, weight %d): %d unfinished, slots %d (%s), %d to create\n",
			q.Name, q.Priority, q.Weight, q.Unfinished, q.Slots, printable(bound("bound by ", q.Limit, q.Blocked, q.Slots)), q.Creates)
		printQuery(out, q.Query)
		if err := printReportLines(out, q.Capacity); err != nil {
			return err
		}
		if err := printActions(out, p, q.Name); err != nil {
			return err
		}
	}
	printNotKnown(out, p)
	return nil
}

// printNotKnown prints what the plan's creates depend on that only making them tells (nothing without a create).
func printNotKnown(out io.Writer, p *scheduler.Plan) {
	ks := p.NotKnown()
	if len(ks) == 0 {
		return
	}
	fmt.Fprintln(out, "Not known before executing (tick logs what came of each create):")
	for _, k := range ks {
		fmt.Fprintf(out, "  %s\n", k)
	}
}

// printQuery prints what the query doctor says of a read (the plan's problems and the role's warnings), as status's
// Query line does; nothing without a database.
func printQuery(out io.Writer, f *scheduler.QueryFinding) {
	if f != nil {
		fmt.Fprintf(out, "Query: %s\n", printable(f.String()))
	}
}

// printReportLines prints what a template's capacity report says beyond the nodes and quotas (Report.Lines), as
// status does; nothing when it says nothing more.
func printReportLines(out io.Writer, c *capacity.Report) error {
	if c == nil || len(c.Lines()) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	printLines(w, "  ", c.Lines())
	return w.Flush()
}

// printActions prints the deletes, creates and skips of queue (all of them for a configuration without queues:,
// whose queue is ""), in the order tick makes them: the deletes, then each create, a retry's followed by the delete
// of the attempt it supersedes.
func printActions(out io.Writer, p *scheduler.Plan, queue string) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// With job.requestsFrom each create's worker requests are its row's: a column of their own.
	sized := slices.ContainsFunc(p.Creates, func(c scheduler.Create) bool { return c.Requests != nil })
	col := func(s string) string {
		if !sized {
			return ""
		}
		return s + "\t"
	}
	fmt.Fprintln(w, "ACTION\tJOB\tTASK\tATTEMPT\t"+col("REQUESTS")+"WHY")
	del := func(d scheduler.JobStatus) {
		fmt.Fprintf(w, "delete\t%s\t%q\t%d\t%s%s %s: %s\n", printable(d.Name), d.Key, d.Attempt, col("-"), d.State, stamp(d.FinishedAt), printable(d.Delete))
	}
	for _, d := range p.Deletes() {
		if d.Queue == queue && d.Delete != scheduler.DeleteRetried {
			del(d)
		}
	}
	for _, c := range p.Creates {
		if c.Queue != queue {
			continue
		}
		why := "new row"
		if c.Supersedes != nil {
			why = fmt.Sprintf("retry: attempt %d failed (%s)", c.Supersedes.Attempt, printable(c.Supersedes.Reason))
		}
		fmt.Fprintf(w, "create\t%s\t%q\t%d\t%s%s\n", c.Job.Name, c.Key, c.Attempt, col(requestsText(c.Requests)), why)
		if c.Supersedes != nil {
			del(*c.Supersedes)
		}
	}
	for _, sk := range p.Skipped {
		if sk.Queue != queue {
			continue
		}
		fmt.Fprintf(w, "skip\t-\t%q\t-\t%s%s\n", sk.Key, col("-"), printable(sk.Reason))
	}
	return w.Flush()
}

// requestsText is a create's requests in words, by resource: "cpu=2,memory=1Gi" ("-" for none: the template's).
func requestsText(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "-"
	}
	return printable(strings.ReplaceAll(capacity.Quantities(l), " ", ","))
}

// printReport prints a report as printDoc does, a status's Jobs one at a time (thousands of Jobs are megabytes).
func printReport(out io.Writer, format string, st any) error {
	if s, ok := st.(*report.Status); ok {
		doc := *s
		doc.Jobs = nil
		return printDocWith(out, format, &doc, "jobs", s.Jobs)
	}
	return printDoc(out, format, st)
}

// printDoc prints v as an indented JSON or a YAML document.
func printDoc(out io.Writer, format string, v any) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

// printDocWith prints doc as printDoc prints it, byte for byte, with items as the array of doc's top-level field key
// (nil in doc), written one item at a time: printJSONWith or printYAMLWith.
func printDocWith[T any](out io.Writer, format string, doc any, key string, items []T) error {
	if format == "json" {
		return printJSONWith(out, doc, key, items)
	}
	return printYAMLWith(out, doc, key, items)
}

// printYAMLWith is printJSONWith for YAML: each item is marshalled on its own and written as an element of the block
// sequence under key, where printDoc holds the whole document three times (JSON, a tree of maps, YAML).
func printYAMLWith[T any](out io.Writer, doc any, key string, items []T) error {
	head, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	field := "\n" + key + ":"
	before, after, ok := bytes.Cut(append([]byte("\n"), head...), []byte(field+" null\n"))
	if !ok {
		return fmt.Errorf("printing the document: it has no top-level %q", key)
	}
	w := bufio.NewWriter(out)
	w.Write(bytes.TrimPrefix(before, []byte("\n")))
	if len(before) > 0 {
		w.WriteString("\n")
	}
	w.WriteString(key + ":")
	switch {
	case items == nil:
		w.WriteString(" null\n")
	case len(items) == 0:
		w.WriteString(" []\n")
	default:
		w.WriteString("\n")
		for i := range items {
			item, err := yaml.Marshal(items[i])
			if err != nil {
				return err
			}
			w.WriteString("- ")
			writeIndented(w, bytes.TrimSuffix(item, []byte("\n")))
			w.WriteString("\n")
		}
	}
	w.Write(after)
	return w.Flush()
}

// yamlBreaks are YAML's line breaks (\r, \n, NEL, LS, PS): the YAML emitter indents the line after each, unless it
// is empty.
var yamlBreaks = regexp.MustCompile("[\r\n\u0085\u2028\u2029]")

// writeIndented writes doc, a YAML document, indented by two spaces after its first line: an element of a block
// sequence, as the emitter writes it.
func writeIndented(w *bufio.Writer, doc []byte) {
	for {
		at := yamlBreaks.FindIndex(doc)
		if at == nil {
			w.Write(doc)
			return
		}
		w.Write(doc[:at[1]])
		doc = doc[at[1]:]
		if next := yamlBreaks.FindIndex(doc); len(doc) > 0 && (next == nil || next[0] > 0) {
			w.WriteString("  ")
		}
	}
}

// printJSONWith prints doc as printDoc prints it as JSON, byte for byte, with items as the array of doc's top-level
// field key (nil in doc): each item is encoded on its own and written through a buffer, so that the document is
// never held whole, as printDoc holds it (encoded, then a second time indented). A plan's Jobs over 10,000 Jobs are
// megabytes of text.
func printJSONWith[T any](out io.Writer, doc any, key string, items []T) error {
	head, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	field := "\n  \"" + key + "\": "
	before, after, ok := bytes.Cut(head, []byte(field+"null"))
	if !ok {
		return fmt.Errorf("printing the document: it has no top-level %q", key)
	}
	w := bufio.NewWriter(out)
	w.Write(before)
	w.WriteString(field)
	switch {
	case items == nil:
		w.WriteString("null")
	case len(items) == 0:
		w.WriteString("[]")
	default:
		var item bytes.Buffer
		enc := json.NewEncoder(&item)
		enc.SetIndent("    ", "  ")
		for i := range items {
			sep := ",\n    "
			if i == 0 {
				sep = "[\n    "
			}
			item.Reset()
			if err := enc.Encode(items[i]); err != nil {
				return err
			}
			w.WriteString(sep)
			w.Write(bytes.TrimSuffix(item.Bytes(), []byte("\n")))
		}
		w.WriteString("\n  ]")
	}
	w.Write(after)
	w.WriteString("\n")
	return w.Flush()
}

// printStatus prints the report as aligned sections; each section is aligned on its own, so one long line does not
// push every other value to the right.
func printStatus(out io.Writer, st *report.Status) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	backlog := strconv.Itoa(st.Backlog)
	if st.BacklogCapped {
		backlog += "+"
	}
	fmt.Fprintf(w, "Scheduler:\t%s (namespace %s)\n", st.Scheduler, st.Namespace)
	fmt.Fprintf(w, "Backlog:\t%s row(s) without a Job\n", backlog)
	fmt.Fprintf(w, "Drain:\t%s\n", st.Drain.Message)
	queuedCount := ""
	if n := st.States[scheduler.StateQueued]; n > 0 || st.Mode.Queued != "" {
		queuedCount = fmt.Sprintf(", %d queued", n)
	}
	fmt.Fprintf(w, "Jobs:\t%d running, %d starting, %d unschedulable%s, %d succeeded (kept), %d in backoff, %d dead\n",
		st.States[scheduler.StateRunning], st.States[scheduler.StateStarting], st.States[scheduler.StateUnschedulable], queuedCount,
		st.States[scheduler.StateSucceeded], st.States[scheduler.StateBackoff], st.States[scheduler.StateDead])
	if len(st.Holds) > 0 {
		fmt.Fprintf(w, "Holds:\t%s (the unfinished Jobs' pods' requests; suspended ones not counted)\n", capacity.Quantities(st.Holds))
	}
	if st.RowRequests != nil {
		fmt.Fprintf(w, "Rows ask:\t%s (job.requestsFrom; dry-run shows each row's)\n", rowAsks(st.RowRequests))
	}
	printLines(w, "", st.Mode.Lines)
	fmt.Fprintf(w, "Retry:\t%d attempt(s) in all, backoff %s doubling to %s, dead kept %s\n", st.Retry.MaxAttempts,
		st.Retry.Backoff, st.Retry.MaxBackoff, deadRetention(st.Retry.DeadRetention))
	fmt.Fprintf(w, "Slots:\t%d (bound by %s)\n", st.Slots, printable(st.Limit))
	fmt.Fprintf(w, "Next tick:\t%s\n", printable(st.Next))
	if st.Lease != nil {
		fmt.Fprintf(w, "Lease:\t%s\n", printable(st.Lease.String(time.Now())))
	}
	if st.Wake != nil {
		fmt.Fprintf(w, "Wake:\t%s\n", printable(st.Wake.String(time.Now())))
	}
	if st.Query != nil {
		fmt.Fprintf(w, "Query:\t%s\n", printable(st.Query.String()))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := printQueues(out, w, st.Queues); err != nil {
		return err
	}
	if err := printCapacity(out, w, "Capacity", st.Capacity); err != nil {
		return err
	}
	for _, q := range st.Queues {
		if err := printCapacity(out, w, "Capacity of queue "+q.Name, q.Capacity); err != nil {
			return err
		}
	}
	var problems, queued, cancelled []scheduler.JobStatus
	for _, j := range st.Jobs {
		switch {
		case j.Delete == scheduler.DeleteCancelled:
			cancelled = append(cancelled, j)
		case j.State == scheduler.StateUnschedulable:
			problems = append(problems, j)
		case j.State == scheduler.StateQueued:
			queued = append(queued, j)
		}
	}
	if len(cancelled) > 0 {
		fmt.Fprintln(out, "\nCancelled (source.cancelQuery returns their key; the next tick deletes them):")
		fmt.Fprintln(w, "  JOB\tTASK\tATTEMPT\tSTATE")
		for _, j := range cancelled {
			fmt.Fprintf(w, "  %s\t%q\t%d\t%s\n", printable(j.Name), j.Key, j.Attempt, j.State)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(queued) > 0 {
		title := st.Mode.Queued
		if title == "" {
			title = "Queued (suspended)"
		}
		fmt.Fprintf(out, "\n%s:\n", title)
		fmt.Fprintln(w, "  JOB\tTASK\tWHY")
		for _, j := range queued {
			fmt.Fprintf(w, "  %s\t%q\t%s\n", printable(j.Name), j.Key, printable(j.Reason))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(out, "\nUnschedulable:")
		fmt.Fprintln(w, "  JOB\tTASK\tWHY")
		for _, j := range problems {
			fmt.Fprintf(w, "  %s\t%q\t%s\n", printable(j.Name), j.Key, printable(j.Reason))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(st.Backoff) > 0 {
		fmt.Fprintln(out, "\nIn backoff (the next attempt competes for a slot from its time on):")
		fmt.Fprintln(w, queueCol(st, "QUEUE")+"TASK\tATTEMPT\tNEXT ATTEMPT AT\tJOB\tLAST FAILURE")
		for _, t := range st.Backoff {
			fmt.Fprintf(w, "%s%q\t%d\t%s\t%s\t%s\n", queueCol(st, t.Queue), t.Key, t.Attempt, stamp(t.RetryAt), printable(t.Job), printable(t.Reason))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(st.Dead) > 0 {
		fmt.Fprintln(out, "\nDead (no attempt left; `jobsched retry KEY` starts again at attempt 1):")
		fmt.Fprintln(w, queueCol(st, "QUEUE")+"TASK\tATTEMPTS\tSINCE\tJOB\tLAST FAILURE")
		for _, t := range st.Dead {
			fmt.Fprintf(w, "%s%q\t%d\t%s\t%s\t%s\n", queueCol(st, t.Queue), t.Key, t.Attempt, stamp(t.Since), printable(t.Job), printable(t.Reason))
		}
	}
	return w.Flush()
}

// printCapacity prints a capacity report under title (nothing for nil).
func printCapacity(out io.Writer, w *tabwriter.Writer, title string, c *capacity.Report) error {
	if c == nil {
		return nil
	}
	fit := "no limit"
	if c.Fit >= 0 {
		fit = fmt.Sprintf("%d more Job(s)", c.Fit)
	}
	fmt.Fprintf(out, "\n%s: %s; %s\n", title, fit, printable(c.Binding))
	printNodes(w, c.Nodes)
	for _, q := range c.Quota {
		fmt.Fprintf(w, "  quota %s %s:\t%d more\n", printable(q.Name), printable(q.Resource), q.Fits)
	}
	if c.Tick != "" {
		fmt.Fprintf(w, "  next tick:\t%s\n", printable(c.Tick))
	}
	if len(c.Pending) > 0 {
		fmt.Fprintf(w, "  others' pods:\t%d unbound pod(s) of other workloads counted as taking room (e.g. %s on %s)\n", len(c.Pending), printable(c.Pending[0].Pod), printable(c.Pending[0].Node))
	}
	printLines(w, "  ", c.Lines())
	if c.Listed != "" {
		fmt.Fprintf(w, "  listed:\t%s\n", printable(c.Listed))
	}
	if c.Warning != "" {
		fmt.Fprintf(w, "  warning:\t%s\n", printable(c.Warning))
	}
	return w.Flush()
}

// printLines prints lines (a capacity mode's: its section of status, what a Report says beyond nodes and quotas)
// as rows of a table, each indented by indent: status and dry-run show them alike.
func printLines(w io.Writer, indent string, lines []capacity.Line) {
	for _, l := range lines {
		fmt.Fprintf(w, "%s%s:\t%s\n", indent, printable(l.Label), printable(l.Text))
	}
}

// printQueues prints the queues of an install with queues: (none without), one line each: backlog, Jobs, slots and
// what bound them.
func printQueues(out io.Writer, w *tabwriter.Writer, qs []report.QueueStatus) error {
	if len(qs) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nQueues (the lines above are the install's totals):")
	fmt.Fprintln(w, "  QUEUE\tPRIORITY\tWEIGHT\tBACKLOG\tUNFINISHED\tATTEMPTS\tSLOTS\tBOUND BY")
	for _, q := range qs {
		backlog := strconv.Itoa(q.Backlog)
		if q.BacklogCapped {
			backlog += "+"
		}
		fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", q.Name, q.Priority, q.Weight, backlog, q.Unfinished, q.Retry.MaxAttempts, q.Slots,
			printable(bound("", q.Limit, q.Blocked, q.Slots)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, q := range qs {
		var sizes []string
		if len(q.Holds) > 0 {
			sizes = append(sizes, "holds "+capacity.Quantities(q.Holds))
		}
		if q.RowRequests != nil {
			sizes = append(sizes, "rows ask "+rowAsks(q.RowRequests))
		}
		if len(sizes) > 0 {
			fmt.Fprintf(out, "  %s: %s\n", q.Name, strings.Join(sizes, "; "))
		}
		if q.Query != nil {
			fmt.Fprintf(out, "  %s: query: %s\n", q.Name, printable(q.Query.String()))
		}
		if len(q.GroupsAtCap) > 0 {
			fmt.Fprintf(out, "  %s: %d group(s) at their cap of %d unfinished (the next pass reads none of their rows): %s\n",
				q.Name, len(q.GroupsAtCap), q.GroupMax, groupList(q.GroupsAtCap))
		}
	}
	return nil
}

// rowAsks is what a sized queue's rows ask, in words: "cpu up to 8 (NULL: 1), memory up to 16Gi (NULL: none)".
func rowAsks(r *scheduler.RowRequests) string {
	var parts []string
	for _, res := range slices.Sorted(maps.Keys(r.Max)) {
		most, null := r.Max[res], "none"
		if d, ok := r.Default[res]; ok {
			null = d.String()
		}
		parts = append(parts, fmt.Sprintf("%s up to %s (NULL: %s)", res, most.String(), null))
	}
	return strings.Join(parts, ", ")
}

// maxGroupNames bounds the groups a line names; -o json has all of them.
const maxGroupNames = 10

// groupList names groups (row values: quoted, control characters escaped), the first maxGroupNames of them.
func groupList(groups []string) string {
	var parts []string
	for i, g := range groups {
		if i == maxGroupNames {
			parts = append(parts, fmt.Sprintf("and %d more", len(groups)-i))
			break
		}
		parts = append(parts, strconv.Quote(g))
	}
	return strings.Join(parts, ", ")
}

// queueCol is a table line's start: with queues:, its first column, v (a queue's name, or the header).
func queueCol(st *report.Status, v string) string {
	if len(st.Queues) == 0 {
		return "  "
	}
	return "  " + v + "\t"
}

// printTask prints one task: where it stands, its attempts and their pods, and its row's variables.
func printTask(out io.Writer, v *report.TaskView) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	queue := ""
	if v.Queue != "" {
		queue = ", queue " + v.Queue
	}
	fmt.Fprintf(w, "Task:\t%q (scheduler %s%s, namespace %s)\n", v.Key, v.Scheduler, queue, v.Namespace)
	fmt.Fprintf(w, "State:\t%s\n", printable(v.State))
	fmt.Fprintf(w, "Why:\t%s\n", printable(v.Why))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(v.Attempts) > 0 {
		fmt.Fprintln(out, "\nAttempts:")
		fmt.Fprintln(w, "  ATTEMPT\tJOB\tSTATE\tFINISHED\tREASON")
		for _, a := range v.Attempts {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\n", a.Attempt, printable(a.Name), a.State, stamp(a.FinishedAt), printable(a.Reason))
			for _, p := range a.Pods {
				fmt.Fprintf(w, "    pod %s\t%s\t%s\t\t%s\n", printable(p.Name), printable(p.Phase), printable(p.Node), printable(p.Reason))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if v.Env != nil {
		fmt.Fprintln(out, "\nIts row now, as the Job's variables (as the process sees them):")
		for _, e := range v.Env {
			fmt.Fprintf(w, "  %s\t%s\n", e.Name, printable(e.Value))
		}
	}
	return w.Flush()
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func deadRetention(d string) string {
	if d == "0s" {
		return "while its row is selected"
	}
	return d
}

// maxNodeLines bounds the per-node lines of the table; -o json has every node.
const maxNodeLines = 10

// printNodes shows the considered nodes with the most room first, then how many were excluded and why.
func printNodes(w io.Writer, nodes []capacity.NodeFit) {
	var considered []capacity.NodeFit
	excluded := map[string]int{}
	for _, n := range nodes {
		if n.Excluded != "" {
			excluded[n.Excluded]++
		} else {
			considered = append(considered, n)
		}
	}
	sort.SliceStable(considered, func(i, j int) bool { return considered[i].Fits > considered[j].Fits })
	for i, n := range considered {
		if i == maxNodeLines {
			fmt.Fprintf(w, "  …\t%d more node(s) considered\n", len(considered)-i)
			break
		}
		fmt.Fprintf(w, "  %s:\t%d more fit (bound by %s); free %s\n", printable(n.Name), n.Fits, printable(n.Limit), resources(n.Free.List()))
	}
	reasons := make([]string, 0, len(excluded))
	for r := range excluded {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  excluded:\t%d node(s): %s\n", excluded[r], printable(r))
	}
}

func resources(rl corev1.ResourceList) string {
	var parts []string
	for name, q := range rl {
		parts = append(parts, printable(string(name))+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
