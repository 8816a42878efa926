//go:build bench

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The figures TestBench adds beside its latency table: a session's
// creation to the first output of its first exec, the memory of an idle
// kernel and of an idle warm sandbox, and what an exec costs in CPU, split
// by process, with a CPU profile of the supervisor.

// publishedFirstOutput are third-party medians, in seconds, for creating a
// hosted sandbox and running a first command in it, as their vendors or
// others published them: context for the reader, not measured here.
var publishedFirstOutput = map[string]float64{"Daytona": 0.11, "E2B": 0.44, "Cloudflare": 1.72, "Modal": 2.66}

// firstOutput is one session's creation and its first exec, streamed.
type firstOutput struct{ create, stdout, result time.Duration }

// sessionFirstOutput creates a session, runs python print(1) in it with the
// answer streamed (its kernel starts for it), notes when the session was
// created, the first stdout event came and the result came, all from the
// moment the create request was sent, and deletes the session.
func (p *phase) sessionFirstOutput() firstOutput {
	t := p.b.t
	start := time.Now()
	sess := p.s.createSession(t, map[string]any{"ttl_seconds": 600})
	f := firstOutput{create: time.Since(start)}
	resp := p.s.streamExec(t, "/v1/sessions/"+sess.ID+"/exec", map[string]any{"language": "python", "code": "print(1)"})
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadBytes('\n')
		var ev struct{ Type, Data string }
		if len(line) > 0 && json.Unmarshal(line, &ev) == nil {
			switch {
			case ev.Type == "stdout" && f.stdout == 0:
				if !strings.HasPrefix(ev.Data, "1") {
					t.Fatalf("first stdout event %q, want 1 first", ev.Data)
				}
				f.stdout = time.Since(start)
			case ev.Type == "result":
				f.result = time.Since(start)
			case ev.Type == "error":
				t.Fatalf("session exec: %s", line)
			}
		}
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	if f.stdout == 0 || f.result == 0 {
		t.Fatalf("session exec streamed no stdout or no result")
	}
	if status, body := p.s.do("DELETE", "/v1/sessions/"+sess.ID, nil); status != 204 {
		t.Fatalf("delete session: %d %s", status, body)
	}
	return f
}

// sandboxMemory is the memory of one sandbox: the RSS of its processes,
// summed (shared pages count once per process), and its memory cgroup's
// usage (v1 memory.usage_in_bytes, v2 memory.current: page cache charged
// to it included).
type sandboxMemory struct {
	RSSKiB      int64 `json:"rss_kib_sum"`
	CgroupBytes int64 `json:"cgroup_bytes"`
	Procs       int   `json:"processes"`
}

// measureSandbox reads the memory of the sandbox whose cgroup is name, and
// the names of its processes.
func (p *phase) measureSandbox(name string) (sandboxMemory, []string) {
	dir := filepath.Join(memoryDir(p.b.in), name)
	var m sandboxMemory
	var comms []string
	for _, f := range []string{"memory.current", "memory.usage_in_bytes"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			m.CgroupBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			break
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, pid := range strings.Fields(string(b)) {
		st := procStatus(pid)
		if f := strings.Fields(st["VmRSS"]); len(f) > 0 {
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			m.RSSKiB += kb
		}
		m.Procs++
		comms = append(comms, st["Name"])
	}
	return m, comms
}

// kernelMemory measures every session kernel's sandbox (k-* cgroups) and
// returns the median by cgroup usage.
func (p *phase) kernelMemory() sandboxMemory {
	ents, _ := os.ReadDir(memoryDir(p.b.in))
	var all []sandboxMemory
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "k-") {
			m, _ := p.measureSandbox(e.Name())
			all = append(all, m)
		}
	}
	return medianMemory(all)
}

// warmMemory measures the warm pool's idle sandboxes by language (the
// interpreter among their processes) and returns the median of each.
func (p *phase) warmMemory() map[string]sandboxMemory {
	byLang := map[string][]sandboxMemory{}
	for id := range p.s.idleWarm() {
		m, comms := p.measureSandbox(id)
		lang := "other"
		for _, c := range comms {
			switch c {
			case "python3":
				lang = "python"
			case "node":
				lang = "javascript"
			}
		}
		byLang[lang] = append(byLang[lang], m)
	}
	out := map[string]sandboxMemory{}
	for l, ms := range byLang {
		out[l] = medianMemory(ms)
	}
	return out
}

// memoryDir is the delegated directory that has the memory controller
// (v1: the memory hierarchy's; v2: the one).
func memoryDir(in *installation) string {
	for _, d := range in.cgroupDirs {
		for _, f := range []string{"memory.current", "memory.usage_in_bytes"} {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				return d
			}
		}
	}
	return in.cgroupDirs[0]
}

func medianMemory(ms []sandboxMemory) sandboxMemory {
	if len(ms) == 0 {
		return sandboxMemory{}
	}
	sort.Slice(ms, func(a, b int) bool { return ms[a].CgroupBytes < ms[b].CgroupBytes })
	return ms[len(ms)/2]
}

func (m sandboxMemory) String() string {
	return fmt.Sprintf("RSS summed %.1f MiB over %d processes, cgroup %.1f MiB", float64(m.RSSKiB)/1024, m.Procs, float64(m.CgroupBytes)/(1<<20))
}

// cpuSplit is what one exec costs in CPU, in ms: the supervisor's own
// (utime+stime of its /proc/PID/stat), the reap records' usage.cpu_ms
// (the exec cgroup's CPU: helper, bwrap and payload, without a warm
// sandbox's build; the helper's wait4 rusage where there is no cgroup),
// and a perf sample of the supervisor and everything it started, by
// command name.
type cpuSplit struct {
	Execs         int                `json:"execs"`
	SupervisorMS  float64            `json:"supervisor_ms"`
	ReapCPUMS     float64            `json:"reap_usage_cpu_ms"`
	PerfMS        map[string]float64 `json:"perf_ms,omitempty"`
	Profile       string             `json:"profile,omitempty"`
	ProfileReport string             `json:"profile_report,omitempty"`
}

// perfPeriodNS is the task-clock sampling period: one sample per 0.25 ms of
// CPU.
const perfPeriodNS = 250000

// profile runs python print(1) one-shots at concurrency 2 for the bench's
// throughput time while perf samples the supervisor and its descendants
// (without perf on PATH the split has no perf figures), and returns the
// per-exec CPU split. The perf data and a text report of the supervisor's
// own samples are written to SANDBOXD_BENCH_OUT (default bin/bench).
func (p *phase) profile() cpuSplit {
	t, pid := p.b.t, p.s.cmd.Process.Pid
	data := filepath.Join(p.b.outDir(), "supervisor-c2-"+p.name+".perf.data")
	rec := startPerf(t, data)
	ticks0 := procTicks(t, pid)
	seen := len(p.s.auditRecords())
	execs := p.runAt(2, p.api(benchLangs[0]))
	time.Sleep(300 * time.Millisecond) // the last reap records
	split := cpuSplit{Execs: execs, SupervisorMS: round2(float64(procTicks(t, pid)-ticks0) * 10 / float64(execs))}
	split.ReapCPUMS = round2(reapCPUMS(p.s.auditRecords()[seen:]))
	if rec == nil {
		return split
	}
	_ = rec.Process.Signal(os.Interrupt)
	_ = rec.Wait() // perf ends by its SIGINT once the data is written
	if fi, err := os.Stat(data); err != nil || fi.Size() == 0 {
		t.Fatalf("perf record wrote no data: %v", err)
	}
	split.Profile = data
	split.PerfMS = perfByCommand(t, data, pid, execs)
	split.ProfileReport = data + ".txt"
	var report []byte
	for _, v := range []struct{ title, mode, limit string }{
		{"own time (self), by shared object and symbol", "--no-children", "0.5"},
		{"inclusive time (children: the call graph's callees counted in their callers)", "--children", "2"},
	} {
		out, err := exec.Command("perf", "report", "-i", data, "--stdio", v.mode, "--pid", strconv.Itoa(pid), "--percentage", "relative",
			"--sort", "dso,symbol", "-g", "none", "--percent-limit", v.limit).Output()
		if err != nil {
			t.Fatalf("perf report: %v", err)
		}
		report = fmt.Appendf(report, "# the supervisor (pid %d) at concurrency 2, %d python one-shots: %s, %% of its own samples\n%s\n",
			pid, execs, v.title, out)
	}
	if err := os.WriteFile(split.ProfileReport, report, 0o644); err != nil {
		t.Fatal(err)
	}
	return split
}

// runAt runs fn from c goroutines for the bench's throughput time and
// returns how many calls succeeded; a failure fails the test.
func (p *phase) runAt(c int, fn func() error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done int
	var first error
	start := time.Now()
	for g := 0; g < c; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < p.b.tput {
				err := fn()
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		p.b.t.Fatal(first)
	}
	return done
}

// procTicks is utime+stime of pid, in clock ticks (USER_HZ, 100 a second).
func procTicks(t interface{ Fatal(...any) }, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), ") ") // comm may hold spaces
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// reapCPUMS is the mean usage.cpu_ms of the reap records among recs
// (whole milliseconds each, truncated).
func reapCPUMS(recs []map[string]any) float64 {
	var sum float64
	n := 0
	for _, r := range recs {
		f, _ := r["facts"].(map[string]any)
		u, _ := f["usage"].(map[string]any)
		if v, ok := u["cpu_ms"].(float64); ok && r["step"] == "reap" {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

var perfFork = regexp.MustCompile(`PERF_RECORD_FORK\((\d+):\d+\):\((\d+):\d+\)`)

// perfByCommand counts the samples of a system-wide recording that fell
// on the supervisor (pid) and on its descendants (the recording's fork
// events give their parents), grouped by command as supervisor, helper,
// bwrap, payload and other, in ms per exec.
func perfByCommand(t interface{ Fatal(...any) }, data string, pid, execs int) map[string]float64 {
	out, err := exec.Command("perf", "script", "-i", data, "--show-task-events", "-F", "comm,pid").Output()
	if err != nil {
		t.Fatal(fmt.Errorf("perf script: %w", err))
	}
	parent := map[string]string{}
	samples := map[[2]string]int{} // pid, comm
	for _, line := range strings.Split(string(out), "\n") {
		if m := perfFork.FindStringSubmatch(line); m != nil {
			if m[1] != m[2] { // a process, not a thread
				parent[m[1]] = m[2]
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || strings.Contains(line, "PERF_RECORD_") {
			continue
		}
		samples[[2]string{f[len(f)-1], strings.Join(f[:len(f)-1], " ")}]++
	}
	root := strconv.Itoa(pid)
	below := func(p string) bool {
		for i := 0; i < 64 && p != ""; i++ { // a fork chain is never this deep
			if p = parent[p]; p == root {
				return true
			}
		}
		return false
	}
	ms := map[string]float64{}
	for k, n := range samples {
		group := ""
		switch {
		case k[0] == root:
			group = "supervisor"
		case below(k[0]):
			group = commGroup(k[1])
		default:
			continue
		}
		ms[group] += float64(n) * perfPeriodNS / 1e6 / float64(execs)
	}
	for k, v := range ms {
		ms[k] = round2(v)
	}
	return ms
}

// commGroup names the part of an exec a command belongs to.
func commGroup(comm string) string {
	switch comm {
	case "sandboxd":
		return "supervisor's fork before the helper's exec"
	case "nsinit", "sandboxd-nsinit", "sandboxd-nsini":
		return "helper"
	case "bwrap":
		return "bwrap"
	case "python3", "node", "exec", "sandboxd-exec", "sandboxd-relay": // exec: the shim, /run/sandboxd/exec
		return "payload"
	}
	return "other:" + comm
}

func (c cpuSplit) String() string {
	s := fmt.Sprintf("%d execs: supervisor %.2f ms (/proc), the reap records' usage.cpu_ms %.2f ms (the exec cgroup's, else wait4)", c.Execs, c.SupervisorMS, c.ReapCPUMS)
	if c.PerfMS == nil {
		return s + "; no perf on PATH: no split"
	}
	keys := make([]string, 0, len(c.PerfMS))
	for k := range c.PerfMS {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s += "\n             perf:"
	for _, k := range keys {
		s += fmt.Sprintf(" %s %.2f", k, c.PerfMS[k])
	}
	return s + fmt.Sprintf(" ms\n             profile %s, the supervisor's symbols in %s", c.Profile, c.ProfileReport)
}

// waitWarmIdle waits up to 20 s until the warm pool has an idle python
// sandbox again.
func (p *phase) waitWarmIdle() {
	deadline := time.Now().Add(20 * time.Second)
	for warmIdleMetrics(p.s)["python"] == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// outDir is where the bench writes its files: $SANDBOXD_BENCH_OUT, or
// bin/bench of the checkout.
func (b *bench) outDir() string {
	out := os.Getenv("SANDBOXD_BENCH_OUT")
	if out == "" {
		out = filepath.Join(b.in.repo, "bin", "bench")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// mergeParts adds the figures other bench tests of this run wrote into
// outDir (NAME.json, by `make bench` before TestBench) under NAME.
func (b *bench) mergeParts(figs map[string]any) {
	parts, _ := filepath.Glob(filepath.Join(b.outDir(), "*.json"))
	for _, f := range parts {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			b.t.Fatalf("%s: %v", f, err)
		}
		figs[strings.TrimSuffix(filepath.Base(f), ".json")] = v
	}
}

// startPerf starts a system-wide perf record into data (-p would sample
// neither the threads the Go runtime starts later nor the helpers), its
// events disabled until it has read every process of this busy host: it
// returns once perf acknowledged their enabling. Without perf on PATH it
// returns nil.
func startPerf(t *testing.T, data string) *exec.Cmd {
	if _, err := exec.LookPath("perf"); err != nil {
		return nil
	}
	_ = os.Remove(data)
	ctl, ack := data+".ctl", data+".ack"
	for _, f := range []string{ctl, ack} {
		_ = os.Remove(f)
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(f)
	}
	rec := exec.Command("perf", "record", "-q", "-a", "-e", "task-clock", "-c", strconv.Itoa(perfPeriodNS), "-g",
		"-D", "-1", "--control", "fifo:"+ctl+","+ack, "-o", data)
	if err := rec.Start(); err != nil {
		t.Fatalf("perf record: %v", err)
	}
	// perf opens both fifos; opening them here blocks until it has.
	c, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := os.Open(ack)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := c.WriteString("enable\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(a).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ack" {
		t.Fatalf("perf record never acknowledged enable: %q %v", line, err)
	}
	return rec
}
