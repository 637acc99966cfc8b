package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux the bench runs on.
const clockTick = 100

// cpuParts are the processes whose CPU a throughput row gives, by the name the kernel keeps (at most 15 bytes, so
// a prefix): the control plane, PostgreSQL, jobsched, and the bench itself (its counting proxies, the rows' worker,
// the bare loop).
var cpuParts = []struct{ name, comm string }{
	{"kube-apiserver", "kube-apiserver"}, {"etcd", "etcd"}, {"kube-controller-manager", "kube-controller"},
	{"kube-scheduler", "kube-scheduler"}, {"kwok", "kwok"}, {"postgres", "postgres"}, {"jobsched", "jobsched"},
	{"bench", "bench"},
}

// cpuSample is the CPU time used so far, in seconds: by the whole machine (busy, of total, all cores; /proc/stat)
// and by each of cpuParts (every process of the name summed; /proc/PID/stat). Only the bench's cluster runs here
// while it measures, so a name is its process.
type cpuSample struct {
	busy, total float64
	parts       map[string]float64
}

func sampleCPU() (cpuSample, error) {
	s := cpuSample{parts: map[string]float64{}}
	var err error
	if s.busy, s.total, err = machineNow(); err != nil {
		return s, err
	}
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return s, err
	}
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // exited meanwhile
		}
		comm, secs, ok := processCPU(string(b))
		if !ok {
			continue
		}
		for _, p := range cpuParts {
			if strings.HasPrefix(comm, p.comm) {
				s.parts[p.name] += secs
			}
		}
	}
	return s, nil
}

// machineCPU reads /proc/stat's first line ("cpu user nice system idle iowait irq softirq steal ..."): the busy
// seconds (all but idle and iowait) and all of them.
func machineCPU(stat string) (busy, total float64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var idle float64
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		if i >= 8 { // guest and guest_nice are counted in user and nice already
			break
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return (total - idle) / clockTick, total / clockTick, nil
}

// processCPU reads a /proc/PID/stat line: the process's name (comm, in parentheses, which may hold spaces) and its
// user and system CPU seconds (fields 14 and 15).
func processCPU(stat string) (comm string, secs float64, ok bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(stat[end+1:]) // from field 3, the state
	if len(f) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return stat[open+1 : end], (utime + stime) / clockTick, true
}

// since says, in words, the CPU used from s0 to s: the machine's share busy and each part's seconds.
func (s cpuSample) since(s0 cpuSample) string {
	var b strings.Builder
	if t := s.total - s0.total; t > 0 {
		fmt.Fprintf(&b, "machine %.0f%% busy", 100*(s.busy-s0.busy)/t)
	}
	for _, p := range cpuParts {
		fmt.Fprintf(&b, ", %s %.0f s", p.name, s.parts[p.name]-s0.parts[p.name])
	}
	return strings.TrimPrefix(b.String(), ", ")
}

// Settling before a throughput run (settle).
const (
	settleWindow = 10 * time.Second // one reading of the machine's busy share
	settleDrop   = 0.05             // a window this much less busy than the one before: still falling
	settleMax    = 3 * time.Minute  // the longest wait
)

// settle waits until the machine's CPU use stops falling, at most settleMax: the run before a throughput run leaves
// the cluster work (the API server, the controllers, kwok and etcd finish deleting its Jobs and pods, and compact),
// and a run started in that tail shares the 2 cores with it. It reads the machine's busy share (busy, of total,
// from read: machineNow's) over windows of settleWindow, waiting each with sleep, and stops at the first window no more
// than settleDrop below the one before. It says how long it waited and that last window's busy share.
func settle(read func() (busy, total float64, err error), sleep func(time.Duration)) (string, error) {
	busy0, total0, err := read()
	if err != nil {
		return "", err
	}
	share, waited := -1.0, time.Duration(0)
	for {
		sleep(settleWindow)
		waited += settleWindow
		busy, total, err := read()
		if err != nil {
			return "", err
		}
		prev := share
		if total > total0 {
			share = (busy - busy0) / (total - total0)
		}
		busy0, total0 = busy, total
		if prev >= 0 && share > prev-settleDrop || waited >= settleMax {
			break
		}
	}
	still := ""
	if waited >= settleMax && share >= 0 {
		still = ", still falling"
	}
	return fmt.Sprintf("began after %s settling (machine %.0f%% busy over the last %s%s)", ms(waited), 100*share, ms(settleWindow), still), nil
}

// machineNow is the machine's busy and total CPU seconds so far (/proc/stat).
func machineNow() (busy, total float64, err error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return machineCPU(string(stat))
}
