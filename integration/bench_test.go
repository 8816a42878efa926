//go:build bench

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBench is `make bench` (issue 15): one-shot execs through the API,
// interleaved with bare python3/node and bare bwrap (as root and as the
// service user, the helper's binds) so the noise of this machine hits every
// column alike; then throughput at concurrency 1, 2 and 4, the supervisor's
// memory, and where a cold one-shot's time goes (from its audit records).
// It prints medians and asserts nothing about speed (that is not a test's
// job); the targets are printed next to the figures.
//
// Supervisors run one at a time (they share the state directory and the
// delegated cgroups, whose Sweep at start would kill another's helpers), so
// the rows come in phases, each interleaved with its own bare columns:
//
//	cold   --warm-pool 0 (when the flag exists): one-shot cold, session
//	       process and kernel execs; the helper pool at its default
//	warm   the warm pool at its default: one-shot warm
//	nopool --helper-pool 0 --warm-pool 0: the cold path without the helper
//	       pool, for the difference it makes
func TestBench(t *testing.T) {
	in := setup(t)
	b := &bench{in: in, t: t, n: envInt("SANDBOXD_BENCH_N", 100), rounds: envInt("SANDBOXD_BENCH_ROUNDS", 4),
		tput: time.Duration(envInt("SANDBOXD_BENCH_TPUT_MS", 1500)) * time.Millisecond}
	b.warmFlag = supervisorKnows(in, "warm-pool")
	if only := os.Getenv("SANDBOXD_BENCH_LANGS"); only != "" { // e.g. "python" while investigating
		var keep []benchLang
		for _, l := range benchLangs {
			if strings.Contains(","+only+",", ","+l.language+",") {
				keep = append(keep, l)
			}
		}
		benchLangs = keep
	}
	fmt.Printf("\nsandboxd bench: %d interleaved runs per column in %d rounds, %s; warm pool flag: %v\n", b.n, b.rounds, time.Now().Format(time.RFC3339), b.warmFlag)

	off := []string{}
	if b.warmFlag {
		off = []string{"--warm-pool", "0"}
	}
	cold := b.newPhase("cold", off, func(p *phase) {
		sess := p.s.createSession(t, map[string]any{"ttl_seconds": 3600})
		p.sessions = append(p.sessions, sess.ID)
		p.col("api one-shot cold", p.api)
		p.col("api session process", p.session(sess.ID, "process"))
		p.col("api session kernel", p.session(sess.ID, "kernel"))
	})
	var warm *phase
	if b.warmFlag {
		warm = b.newPhase("warm", nil, func(p *phase) { p.col("api one-shot warm", p.api) })
	}
	nopool := b.newPhase("nopool", append([]string{"--helper-pool", "0"}, off...), func(p *phase) {
		p.col("api one-shot cold, --helper-pool 0", p.api)
	})
	defaults := cold // the phase with the default pools measures a session's first output
	if warm != nil {
		defaults = warm
	}
	defaults.firstOut = true
	// The phases take turns, round after round, so that the load of this
	// machine at any moment hits each of them alike.
	for r := 0; r < b.rounds; r++ {
		for _, p := range []*phase{cold, warm, nopool} {
			if p != nil {
				p.round(r == b.rounds-1)
			}
		}
	}
	figs := map[string]any{"n": b.n, "rounds": b.rounds, "cores": runtime.NumCPU(), "warm_pool_flag": b.warmFlag}
	b.printLatency(figs, cold, warm, nopool)
	b.printThroughput(figs, cold, warm, nopool)
	printFirstOutput(figs, defaults)
	printMemory(figs, cold, warm, nopool)
	fmt.Println("\nCPU per python one-shot at concurrency 2 (a separate window, perf attached):")
	cpu := map[string]any{}
	for _, p := range []*phase{cold, warm} {
		if p != nil {
			fmt.Printf("  %-8s %s\n", p.name, p.cpu)
			cpu[p.name] = p.cpu
		}
	}
	figs["cpu_per_exec"] = cpu
	fmt.Println("\nwhere a cold python one-shot's time goes (medians, ms; launch_us of its reap record, and the client's time outside it):")
	bd := map[string]any{}
	for _, p := range []*phase{cold, nopool} {
		fmt.Printf("  %-8s %s\n", p.name, p.breakdown())
		bd[p.name] = p.breakdownFigures()
	}
	figs["cold_breakdown_ms"] = bd
	b.mergeParts(figs)
	enc, err := json.Marshal(figs)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BENCH_JSON %s\n", enc)
	fmt.Println(strings.Repeat("-", 72))
}

// printLatency prints the latency table and the latency targets.
func (b *bench) printLatency(figs map[string]any, cold, warm, nopool *phase) {
	lat := map[string]any{}
	for _, lang := range benchLangs {
		fmt.Printf("\n%s (p50/p95 in ms; ratios of p50 to the same phase's bare columns)\n", lang.name)
		fmt.Printf("  %-38s %8s %8s %9s %11s\n", "", "p50", "p95", "/bare", "/bwrap-root")
		l := map[string]any{}
		cold.print(lang.name, true, l)
		if warm != nil {
			warm.print(lang.name, false, l)
		} else {
			fmt.Printf("  %-38s n/a (no --warm-pool)\n", "api one-shot warm")
		}
		nopool.print(lang.name, false, l)
		c, r := cold.p50(lang.name, "api one-shot cold"), cold.p50(lang.name, "bare bwrap (root)")
		fmt.Printf("  target cold p50 <= 1.20 x bare bwrap (root): %.2f\n", ratio(c, r))
		l["cold_over_bwrap_root"] = round2(ratio(c, r))
		if warm != nil {
			w, bare := warm.p50(lang.name, "api one-shot warm"), warm.p50(lang.name, "bare interpreter")
			wp95 := ratio(warm.p95(lang.name, "api one-shot warm"), warm.p95(lang.name, "bare interpreter"))
			fmt.Printf("  target warm p50 <= 0.60 x bare interpreter: %.2f; p95 <= 1.00: %.2f\n", ratio(w, bare), wp95)
			l["warm_over_bare"], l["warm_p95_over_bare_p95"] = round2(ratio(w, bare)), round2(wp95)
		}
		lat[lang.language] = l
	}
	figs["latency_ms"] = lat
}

// printThroughput prints execs per second and per core at concurrency 1,
// 2 and 4.
func (b *bench) printThroughput(figs map[string]any, cold, warm, nopool *phase) {
	cores := float64(runtime.NumCPU())
	fmt.Printf("\nthroughput, python print(1), execs/s (%v per concurrency and round); per core: divided by the %d CPUs this process may use\n", b.tput, runtime.NumCPU())
	fmt.Printf("  %-34s %8s %8s %8s %10s %10s %10s\n", "", "c=1", "c=2", "c=4", "c=1/core", "c=2/core", "c=4/core")
	tp := map[string]any{}
	for _, row := range []struct {
		name string
		p    *phase
	}{{"bare bwrap (root)", cold}, {"api one-shot cold", cold}, {"api one-shot warm", warm}, {"api one-shot cold, --helper-pool 0", nopool}} {
		if row.p == nil {
			fmt.Printf("  %-34s n/a (no --warm-pool)\n", row.name)
			continue
		}
		v := row.p.tputs[row.name]
		fmt.Printf("  %-34s %8.1f %8.1f %8.1f %10.1f %10.1f %10.1f\n", row.name, v[0], v[1], v[2], v[0]/cores, v[1]/cores, v[2]/cores)
		tp[row.name] = map[string]float64{"c1": round2(v[0]), "c2": round2(v[1]), "c4": round2(v[2]),
			"c1_per_core": round2(v[0] / cores), "c2_per_core": round2(v[1] / cores), "c4_per_core": round2(v[2] / cores)}
	}
	figs["throughput_execs_per_s"] = tp
	if c, r := cold.tputs["api one-shot cold"], cold.tputs["bare bwrap (root)"]; r[1] > 0 {
		fmt.Printf("  target api cold at c=2 >= 85%% of bare bwrap's: %.0f%%\n", 100*c[1]/r[1])
		figs["cold_c2_over_bwrap_root"] = round2(c[1] / r[1])
	}
}

// printFirstOutput prints a session's creation to its first output, with
// the published third-party figures beside it.
func printFirstOutput(figs map[string]any, p *phase) {
	var create, stdout, result []time.Duration
	for _, f := range p.first {
		create, stdout, result = append(create, f.create), append(stdout, f.stdout), append(result, f.result)
	}
	fmt.Printf("\nsession create to first output, python print(1) streamed, its kernel started by it (%s phase, %d sessions; ms p50/p95 from the create request):\n", p.name, len(p.first))
	fmt.Printf("  created %s / %s, first stdout event %s / %s, result %s / %s; target first output <= 50 ms\n",
		msf(pct(create, 0.5)), msf(pct(create, 0.95)), msf(pct(stdout, 0.5)), msf(pct(stdout, 0.95)), msf(pct(result, 0.5)), msf(pct(result, 0.95)))
	fmt.Printf("  published third-party medians for hosted sandboxes, not measured here: ")
	names := []string{"Daytona", "E2B", "Cloudflare", "Modal"}
	for i, n := range names {
		fmt.Printf("%s %.2f s%s", n, publishedFirstOutput[n], map[bool]string{true: "\n", false: ", "}[i == len(names)-1])
	}
	figs["session_first_output_ms"] = map[string]any{"phase": p.name, "sessions": len(p.first),
		"create_p50": ms2(pct(create, 0.5)), "create_p95": ms2(pct(create, 0.95)),
		"first_stdout_p50": ms2(pct(stdout, 0.5)), "first_stdout_p95": ms2(pct(stdout, 0.95)),
		"result_p50": ms2(pct(result, 0.5)), "result_p95": ms2(pct(result, 0.95))}
	figs["published_third_party_first_output_s"] = publishedFirstOutput
}

// printMemory prints the supervisor's memory and the sandboxes'.
func printMemory(figs map[string]any, phases ...*phase) {
	fmt.Println("\nmemory with 16 idle sessions each with a python kernel started by one exec, the pools full:")
	sup, kern := map[string]any{}, map[string]any{}
	for _, p := range phases {
		if p == nil {
			continue
		}
		fmt.Printf("  %-8s supervisor VmRSS %.1f MiB, VmHWM %.1f MiB; an idle python kernel: %s\n", p.name,
			float64(p.rssKiB)/1024, float64(p.hwmKiB)/1024, p.kmem)
		sup[p.name] = map[string]int{"vmrss_kib": p.rssKiB, "vmhwm_kib": p.hwmKiB}
		kern[p.name] = p.kmem
		for _, l := range []string{"python", "javascript"} {
			if m, ok := p.wmem[l]; ok {
				fmt.Printf("  %-8s an idle warm %s sandbox: %s\n", p.name, l, m)
			}
		}
		if p.wmem != nil {
			figs["idle_warm_sandbox"] = p.wmem
		}
	}
	fmt.Println("  targets: supervisor <= 64 MiB with the pools full and 16 idle kernels; an idle python kernel <= 40 MiB")
	figs["supervisor_memory"], figs["idle_python_kernel"] = sup, kern
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func ms2(d time.Duration) float64 { return round2(float64(d.Microseconds()) / 1000) }

type benchLang struct{ name, language, code, interp, flag, expr string }

var benchLangs = []benchLang{
	{"python print(1)", "python", "print(1)", "/usr/bin/python3", "-c", "print(1)"},
	{"node console.log(1)", "javascript", "console.log(1)", "/usr/bin/node", "-e", "console.log(1)"},
}

type bench struct {
	in       *installation
	t        *testing.T
	n        int // interleaved runs per column, over all rounds
	rounds   int
	tput     time.Duration // per concurrency and round
	warmFlag bool
}

// phase is one supervisor's share of the run.
type phase struct {
	b        *bench
	name     string
	s        *supervisor
	sessions []string
	cols     []column
	samples  map[string]map[string][]time.Duration // lang -> column -> samples
	tputs    map[string][3]float64                 // execs/s over all rounds
	tdone    map[string]*[3]float64
	ttime    map[string]*[3]time.Duration
	rssKiB   int // the supervisor's VmRSS with 16 idle kernels
	hwmKiB   int
	kmem     sandboxMemory            // an idle python kernel's sandbox (median)
	wmem     map[string]sandboxMemory // an idle warm sandbox's, by language
	first    []firstOutput            // session creation to first output
	firstOut bool                     // this phase measures first
	cpu      cpuSplit                 // CPU per exec at c=2
	flags    []string
	add      func(*phase)
	bd       map[bool][]map[string]float64 // breakdown samples by helper_pooled
	mu       sync.Mutex
	client   map[string]time.Duration // python one-shots: exec id -> client time
}

type column struct {
	name string
	fn   func(benchLang) func() error
}

func (p *phase) col(name string, fn func(benchLang) func() error) {
	p.cols = append(p.cols, column{name, fn})
}

func (b *bench) newPhase(name string, flags []string, add func(*phase)) *phase {
	return &phase{b: b, name: name, samples: map[string]map[string][]time.Duration{}, tputs: map[string][3]float64{},
		tdone: map[string]*[3]float64{}, ttime: map[string]*[3]time.Duration{}, client: map[string]time.Duration{},
		bd: map[bool][]map[string]float64{}, add: add,
		flags: append([]string{"--max-sessions", "40", "--max-sessions-per-caller", "40"}, flags...)}
}

// round starts the phase's supervisor, lets add add its columns (after the
// bare ones), runs them interleaved for each language (its share of the
// runs), then the throughput figures (and, in the last round, the memory
// figure), and stops it.
func (p *phase) round(last bool) {
	b, t := p.b, p.b.t
	p.s = b.in.startSupervisor(t, supervisorOpts{extra: p.flags})
	defer func() {
		p.s.stop()
		for _, id := range p.sessions {
			b.in.dropSession(id)
		}
		p.sessions = nil
	}()
	p.cols = nil
	p.col("bare interpreter", p.bare(nil))
	p.col("bare bwrap (root)", p.bwrap(false))
	p.col("bare bwrap (service user)", p.bwrap(true))
	p.add(p)
	time.Sleep(500 * time.Millisecond) // the pools fill
	runs := max(1, b.n/b.rounds)
	for _, lang := range benchLangs {
		if p.samples[lang.name] == nil {
			p.samples[lang.name] = map[string][]time.Duration{}
		}
		fns := make([]func() error, len(p.cols))
		for c, col := range p.cols {
			fns[c] = col.fn(lang)
		}
		for i := 0; i < runs+2; i++ {
			for c, col := range p.cols {
				start := time.Now()
				if err := fns[c](); err != nil {
					t.Fatal(err)
				}
				if i >= 2 { // warm-up
					p.samples[lang.name][col.name] = append(p.samples[lang.name][col.name], time.Since(start))
				}
			}
		}
	}
	p.collectBreakdown() // of the interleaved runs only
	py := benchLangs[0]
	if p.name == "cold" {
		p.throughput("bare bwrap (root)", p.bwrap(false)(py))
	}
	api := p.cols[len(p.cols)-1].name
	if p.name == "cold" {
		api = "api one-shot cold"
	}
	p.throughput(api, p.api(py))
	for i := 0; p.firstOut && i < runs; i++ {
		p.first = append(p.first, p.sessionFirstOutput())
	}
	if !last {
		return
	}
	if p.name != "nopool" {
		p.cpu = p.profile()
	}
	if p.name == "warm" {
		p.waitWarmIdle() // the profile's takes are replaced
		p.wmem = p.warmMemory()
	}
	p.memory()
}

// bare runs argv (the language's interpreter when nil) as the service
// user with an empty environment.
func (p *phase) bare(argv func(benchLang) []string) func(benchLang) func() error {
	return func(l benchLang) func() error {
		a := []string{l.interp, l.flag, l.expr}
		if argv != nil {
			a = argv(l)
		}
		return p.run(a, true)
	}
}

// bwrap runs the interpreter under bwrap with the binds and namespaces the
// helper asks for, bwrap making its own user namespace, as root or as the
// service user.
func (p *phase) bwrap(asUser bool) func(benchLang) func() error {
	return func(l benchLang) func() error { return p.run(bwrapArgs(l.interp, l.flag, l.expr), asUser) }
}

func (p *phase) run(argv []string, asUser bool) func() error {
	return func() error {
		// env -i: this machine exports variables that slow node 2.7x.
		cmd := exec.Command("/usr/bin/env", append([]string{"-i", "PATH=/usr/bin:/bin"}, argv...)...)
		if asUser {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.b.in.uid), Gid: uint32(p.b.in.gid), Groups: []uint32{}}}
		}
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %w: %q", argv, err, out)
		}
		if string(out) != "1\n" {
			return fmt.Errorf("%v: output %q, want 1", argv, out)
		}
		return nil
	}
}

func bwrapArgs(argv ...string) []string {
	a := []string{"/usr/bin/bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"}
	for _, p := range []string{"/usr", "/etc/alternatives", "/etc/ssl", "/etc/localtime"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dir", "/dev")
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		a = append(a, "--dev-bind-try", d, d)
	}
	a = append(a, "--size", "268435456", "--tmpfs", "/tmp", "--size", "67108864", "--tmpfs", "/dev/shm",
		"--tmpfs", "/workspace", "--remount-ro", "/", "--chdir", "/workspace", "--")
	return append(a, argv...)
}

// api is a one-shot exec through the API; the client's time of each
// python one is kept by exec id for the breakdown.
func (p *phase) api(l benchLang) func() error {
	return func() error {
		start := time.Now()
		status, body := p.s.do("POST", "/v1/exec", map[string]any{"language": l.language, "code": l.code})
		took := time.Since(start)
		var r execResult
		if status != 200 || json.Unmarshal(body, &r) != nil || r.Stdout != "1\n" {
			return fmt.Errorf("api %s: %d %s", l.language, status, body)
		}
		if l.language == "python" {
			p.mu.Lock()
			p.client[r.ID] = took
			p.mu.Unlock()
		}
		return nil
	}
}

func (p *phase) session(id, mode string) func(benchLang) func() error {
	return func(l benchLang) func() error {
		return func() error {
			r := p.s.sessionExec(p.b.t, id, map[string]any{"language": l.language, "code": l.code, "mode": mode})
			if r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "1\n" {
				return fmt.Errorf("session %s %s: %+v", mode, l.language, r)
			}
			return nil
		}
	}
}

// throughput runs fn at concurrency 1, 2 and 4, each for the bench's
// throughput time, and adds to the row's execs per second.
func (p *phase) throughput(row string, fn func() error) {
	if p.tdone[row] == nil {
		p.tdone[row], p.ttime[row] = &[3]float64{}, &[3]time.Duration{}
	}
	for i, c := range []int{1, 2, 4} {
		start := time.Now()
		p.tdone[row][i] += float64(p.runAt(c, fn))
		p.ttime[row][i] += time.Since(start)
		var out [3]float64
		for k := range out {
			if p.ttime[row][k] > 0 {
				out[k] = p.tdone[row][k] / p.ttime[row][k].Seconds()
			}
		}
		p.tputs[row] = out
	}
}

// memory starts 16 sessions with a python kernel each (one exec each),
// lets the pools refill, reads the supervisor's VmRSS and VmHWM, and
// measures the kernels' sandboxes.
func (p *phase) memory() {
	for i := 0; i < 16; i++ {
		sess := p.s.createSession(p.b.t, map[string]any{"ttl_seconds": 3600})
		p.sessions = append(p.sessions, sess.ID)
		if err := p.session(sess.ID, "kernel")(benchLangs[0])(); err != nil {
			p.b.t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	pid := p.s.cmd.Process.Pid
	p.rssKiB, _ = statusInt(pid, "VmRSS")
	p.hwmKiB, _ = statusInt(pid, "VmHWM")
	p.kmem = p.kernelMemory()
}

// collectBreakdown reads the round's audit log: for the python
// one-shots, the reap's launch_us (where the launcher's time went), the
// rest of the client's time (HTTP, accept, decide, prepare, the answer)
// and the gaps between the helper's own report times (t_us), by whether
// the exec took a pre-started helper.
func (p *phase) collectBreakdown() {
	recs := p.s.auditRecords()
	tus := helperStepTimes(recs)
	for _, r := range recs {
		id, _ := r["exec_id"].(string)
		f, _ := r["facts"].(map[string]any)
		lu, _ := f["launch_us"].(map[string]any)
		took, ok := p.client[id]
		if r["step"] != "reap" || lu == nil || !ok {
			continue
		}
		m := map[string]float64{}
		var sum float64
		for _, k := range launchFields {
			v, _ := lu[k].(float64)
			m[k] = v / 1000
			if k != "barrier" { // inside place
				sum += v / 1000
			}
		}
		m["outside the launcher"] = float64(took.Microseconds())/1000 - sum
		m["client"] = float64(took.Microseconds()) / 1000
		for i := 1; i < len(helperSteps); i++ {
			m["helper "+helperSteps[i-1]+"→"+helperSteps[i]] = tus[id][helperSteps[i]] - tus[id][helperSteps[i-1]]
		}
		pooled, _ := f["helper_pooled"].(bool)
		p.bd[pooled] = append(p.bd[pooled], m)
	}
	p.client = map[string]time.Duration{}
}

var (
	launchFields = []string{"acquire", "place", "barrier", "to_exec", "run", "teardown"}
	helperSteps  = []string{"enter", "network", "seccomp", "drop", "exec"}
)

// breakdownFigures are the medians collectBreakdown gathered, by whether
// the helper was pre-started ("pooled") or not ("unpooled").
func (p *phase) breakdownFigures() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, pooled := range []bool{true, false} {
		ms := p.bd[pooled]
		if len(ms) == 0 {
			continue
		}
		med := map[string]float64{"execs": float64(len(ms))}
		for _, k := range breakdownKeys() {
			var v []float64
			for _, m := range ms {
				v = append(v, m[k])
			}
			sort.Float64s(v)
			med[k] = round2(v[len(v)/2])
		}
		out[map[bool]string{true: "pooled", false: "unpooled"}[pooled]] = med
	}
	return out
}

func breakdownKeys() []string {
	keys := append(append([]string{}, launchFields...), "outside the launcher", "client")
	for i := 1; i < len(helperSteps); i++ {
		keys = append(keys, "helper "+helperSteps[i-1]+"→"+helperSteps[i])
	}
	return keys
}

// breakdown renders breakdownFigures.
func (p *phase) breakdown() string {
	var b strings.Builder
	figs := p.breakdownFigures()
	for _, pooled := range []string{"pooled", "unpooled"} {
		med, ok := figs[pooled]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n    helper pre-started: %-5v (%.0f execs): ", pooled == "pooled", med["execs"])
		for _, k := range breakdownKeys() {
			fmt.Fprintf(&b, "%s %.2f  ", k, med[k])
		}
	}
	if b.Len() == 0 {
		return "no reap with launch_us"
	}
	return b.String()
}

func (p *phase) print(lang string, bare bool, figs map[string]any) {
	s := p.samples[lang]
	bareP50, rootP50 := pct(s["bare interpreter"], 0.5), pct(s["bare bwrap (root)"], 0.5)
	for _, c := range p.cols {
		if !bare && strings.HasPrefix(c.name, "bare ") {
			continue
		}
		name := c.name
		if strings.HasPrefix(name, "bare ") && p.name != "cold" {
			name += " [" + p.name + "]"
		}
		p50 := pct(s[c.name], 0.5)
		fmt.Printf("  %-38s %8s %8s %9.2f %11.2f\n", name, msf(p50), msf(pct(s[c.name], 0.95)), ratio(p50, bareP50), ratio(p50, rootP50))
		figs[name] = map[string]float64{"p50": ms2(p50), "p95": ms2(pct(s[c.name], 0.95))}
	}
}

func (p *phase) p50(lang, col string) time.Duration { return pct(p.samples[lang][col], 0.5) }
func (p *phase) p95(lang, col string) time.Duration { return pct(p.samples[lang][col], 0.95) }

// supervisorKnows reports whether the installed supervisor has --flag.
func supervisorKnows(in *installation, flag string) bool {
	out, _ := exec.Command(in.path("bin/sandboxd"), "--help").CombinedOutput()
	return strings.Contains(string(out), "-"+flag+" ")
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
