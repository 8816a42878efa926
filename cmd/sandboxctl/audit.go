package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/policy"
)

// Exit codes of `sandboxctl audit`.
const (
	exitAuditBroken = 1 // the log does not verify, or (show) the exec is not in it
)

const auditUsage = `usage:
  sandboxctl audit verify [--json] [--partial] [FILE...]
  sandboxctl audit show EXEC_ID [--log FILE] [--json]`

// cmdAudit reads and checks the audit trail. It never talks to the
// supervisor: it reads the log files, which the supervisor's uid (or root)
// can read.
func cmdAudit(args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprintln(sio.err, "sandboxctl: audit needs a subcommand\n"+auditUsage)
		return exitUsage
	}
	switch args[0] {
	case "verify":
		return auditVerify(args[1:], sio, lookupEnv)
	case "show":
		return auditShow(args[1:], sio, lookupEnv)
	default:
		fmt.Fprintf(sio.err, "sandboxctl: unknown audit subcommand %q\n%s\n", args[0], auditUsage)
		return exitUsage
	}
}

// defaultAuditLog is where sandboxd writes by default: $SANDBOXD_AUDIT_LOG,
// else audit.log in $SANDBOXD_STATE_DIR or the default state directory.
func defaultAuditLog(lookupEnv func(string) (string, bool)) string {
	if p, _ := lookupEnv("SANDBOXD_AUDIT_LOG"); p != "" {
		return p
	}
	dir := policy.DefaultStateDir
	if d, _ := lookupEnv("SANDBOXD_STATE_DIR"); d != "" {
		dir = d
	}
	return filepath.Join(dir, policy.DefaultAuditLogName)
}

func verifyFile(path string, o audit.VerifyOptions) (*audit.Report, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return audit.Verify(os.DirFS(filepath.Dir(abs)), filepath.Base(abs), o)
}

type verifyResult struct {
	Path   string        `json:"path"`
	Error  string        `json:"error,omitempty"`
	Report *audit.Report `json:"report,omitempty"`
}

func auditVerify(args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	partial := fs.Bool("partial", false, "")
	logPath := fs.String("log", "", "")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "audit verify: %v", err)
	}
	if *logPath != "" {
		files = append(files, *logPath)
	}
	if len(files) == 0 {
		files = []string{defaultAuditLog(lookupEnv)}
	}
	var results []verifyResult
	intact := true
	for _, f := range files {
		rep, err := verifyFile(f, audit.VerifyOptions{Partial: *partial})
		res := verifyResult{Path: f, Report: rep}
		if err != nil {
			res.Error = fmt.Sprintf("cannot read the audit log %s: %v", f, err)
			intact = false
		} else if !rep.Intact {
			intact = false
		}
		results = append(results, res)
	}
	if *asJSON {
		writeIndented(sio.out, map[string]any{"intact": intact, "logs": results})
	} else {
		for i, r := range results {
			if i > 0 {
				fmt.Fprintln(sio.out)
			}
			printVerify(sio.out, r)
		}
	}
	if !intact {
		return exitAuditBroken
	}
	return exitOK
}

func writeIndented(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

func printVerify(w io.Writer, r verifyResult) {
	if r.Error != "" {
		fmt.Fprintf(w, "audit log NOT VERIFIED: %s\n", r.Error)
		return
	}
	rep := r.Report
	if rep.Intact {
		fmt.Fprintf(w, "audit log intact: %s\n", r.Path)
	} else {
		fmt.Fprintf(w, "audit log BROKEN: %s\n", r.Path)
		b := rep.Break
		fmt.Fprintf(w, "  first broken point  %s line %d (byte %d), where seq %d was expected\n", b.File, b.Line, b.Offset, b.Seq)
		fmt.Fprintf(w, "  what                %s: %s\n", b.Kind, b.Detail)
		if rep.Records > 0 {
			fmt.Fprintf(w, "  verified before it  %d record(s), seq %d..%d, last hash %s\n", rep.Records, rep.FirstSeq, rep.LastSeq, rep.Head)
		} else {
			fmt.Fprintf(w, "  verified before it  nothing\n")
		}
		for _, s := range rep.Notes {
			fmt.Fprintf(w, "  note                %s\n", s)
		}
		return
	}
	if rep.LogID != "" {
		fmt.Fprintf(w, "  log id      %s\n", rep.LogID)
	}
	var files []string
	for _, f := range rep.Files {
		files = append(files, fmt.Sprintf("%s (seq %d..%d)", f.Name, f.FirstSeq, f.LastSeq))
	}
	fmt.Fprintf(w, "  files       %d: %s\n", len(rep.Files), strings.Join(files, ", "))
	fmt.Fprintf(w, "  records     %d, seq %d..%d, %s .. %s\n", rep.Records, rep.FirstSeq, rep.LastSeq,
		rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  execs       %d accepted: %d ran, %d launch failures, %d refused, %d interrupted, %d without an end (running now, or the supervisor died and has not restarted)\n",
		rep.Execs, rep.Ran, rep.Failed, rep.Refused, rep.Interrupted, len(rep.Open))
	if rep.Probes > 0 {
		fmt.Fprintf(w, "  probes      %d health probes\n", rep.Probes)
	}
	stop := "the supervisor is running, or it stopped without a stop record"
	if rep.CleanStop {
		stop = "the log ends with a clean stop"
	}
	fmt.Fprintf(w, "  supervisor  %d starts; %s\n", rep.Starts, stop)
	fmt.Fprintf(w, "  end         proven by the %s\n", rep.Tail)
	fmt.Fprintf(w, "  last hash   %s (seq %d): note it down to detect a later rewrite of the whole log\n", rep.Head, rep.LastSeq)
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  not checked %s\n", s)
	}
	for _, s := range rep.Notes {
		fmt.Fprintf(w, "  note        %s\n", s)
	}
}

// shownRecord is one record of an exec as `show --json` prints it.
type shownRecord struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Verified bool   `json:"verified"`
	audit.Record
}

func auditShow(args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("audit show", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	logPath := fs.String("log", defaultAuditLog(lookupEnv), "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "audit show: %v", err)
	}
	if len(pos) != 1 || pos[0] == "" {
		return usage(sio.err, "audit show needs exactly one EXEC_ID (a unique prefix will do)")
	}
	want := pos[0]
	abs, err := filepath.Abs(*logPath)
	if err != nil {
		return usage(sio.err, "audit show: %v", err)
	}
	fsys := os.DirFS(filepath.Dir(abs))
	verified := map[string]bool{}
	rep, err := audit.Verify(fsys, filepath.Base(abs), audit.VerifyOptions{Partial: true,
		Visit: func(file string, line int, r audit.Record) { verified[file+":"+strconv.Itoa(line)] = true }})
	if err != nil {
		fmt.Fprintf(sio.err, "sandboxctl: cannot read the audit log %s: %v\n", *logPath, err)
		return exitAuditBroken
	}
	var recs []shownRecord
	ids := map[string]bool{}
	_, err = audit.ReadRecords(fsys, rep.Chain, func(file string, line int, r audit.Record) {
		if r.ExecID == "" || !strings.HasPrefix(r.ExecID, want) {
			return
		}
		ids[r.ExecID] = true
		recs = append(recs, shownRecord{File: file, Line: line, Verified: verified[file+":"+strconv.Itoa(line)], Record: r})
	})
	if err != nil {
		fmt.Fprintf(sio.err, "sandboxctl: %v\n", err)
		return exitAuditBroken
	}
	switch {
	case len(ids) == 0:
		fmt.Fprintf(sio.err, "sandboxctl: no record of exec %q in %s\n", want, *logPath)
		return exitAuditBroken
	case len(ids) > 1:
		var list []string
		for id := range ids {
			list = append(list, id)
		}
		sort.Strings(list)
		fmt.Fprintf(sio.err, "sandboxctl: %q is a prefix of %d exec ids (%s); give more of it\n", want, len(list), strings.Join(list, ", "))
		return exitUsage
	}
	execID := recs[0].ExecID
	st := buildStory(execID, recs)
	if *asJSON {
		writeIndented(sio.out, map[string]any{
			"exec_id": execID, "log": *logPath, "log_intact": rep.Intact, "break": rep.Break,
			"skipped": rep.Skipped, "summary": st.summary, "records": recs,
		})
	} else {
		fmt.Fprintf(sio.out, "exec %s\n", execID)
		switch {
		case rep.Intact && len(rep.Skipped) == 0:
			fmt.Fprintf(sio.out, "log: %s — chain intact (seq %d..%d)\n", *logPath, rep.FirstSeq, rep.LastSeq)
		case rep.Intact:
			fmt.Fprintf(sio.out, "log: %s — chain intact from seq %d; not checked: %s\n", *logPath, rep.FirstSeq, strings.Join(rep.Skipped, "; "))
		default:
			fmt.Fprintf(sio.out, "log: %s — WARNING: the chain is BROKEN at %s line %d (%s: %s); records marked UNVERIFIED cannot be trusted\n",
				*logPath, rep.Break.File, rep.Break.Line, rep.Break.Kind, rep.Break.Detail)
		}
		st.print(sio.out)
	}
	if !rep.Intact {
		return exitAuditBroken
	}
	for _, r := range recs {
		if !r.Verified {
			return exitAuditBroken
		}
	}
	return exitOK
}

// story is an exec's records turned into sentences.
type story struct {
	recs    []shownRecord
	summary map[string]any
}

func buildStory(id string, recs []shownRecord) *story {
	st := &story{recs: recs, summary: map[string]any{"exec_id": id}}
	held := map[string]any{}
	outcome := "no end recorded: the exec is still running, or its supervisor died and has not been restarted"
	for _, r := range recs {
		f := r.Facts
		switch r.Step {
		case audit.StepAccept:
			st.summary["caller"] = map[string]int{"uid": r.CallerUID, "gid": r.CallerGID, "pid": r.CallerPID}
			st.summary["accepted_at"] = r.Time
			if !r.OK {
				outcome = "refused at accept: " + r.Error
			}
		case audit.StepDecide:
			if !r.OK {
				outcome = "refused by policy (decide): " + r.Error
			}
			if l, ok := f["limits"]; ok && held["limits"] == nil {
				held["limits"] = l
			}
		case audit.StepPrepare:
			if l, ok := f["limits"]; ok {
				held["limits"] = l // as applied by the launcher
			}
			if !r.OK {
				outcome = "the launch failed while preparing: " + r.Error
			}
		case audit.StepSeccomp:
			if v, ok := f["profile_sha256"]; ok {
				held["profile_sha256"] = v
			}
		case audit.StepExec:
			for _, k := range []string{"profile_sha256", "mounts_sha256", "helper_version"} {
				if v, ok := f[k]; ok && r.OK {
					held[k] = v
				}
			}
		case audit.StepReap:
			if r.OK {
				outcome = "ran: " + reapSentence(f)
			} else {
				outcome = "the launch failed (the payload never ran): " + r.Error
			}
		case audit.StepInterrupted:
			outcome = "interrupted: " + r.Error
		}
	}
	st.summary["outcome"] = outcome
	if len(held) > 0 {
		st.summary["policy"] = held
	}
	return st
}

func (st *story) print(w io.Writer) {
	if c, ok := st.summary["caller"].(map[string]int); ok {
		fmt.Fprintf(w, "asked by uid %d, gid %d, pid %d (SO_PEERCRED)\n", c["uid"], c["gid"], c["pid"])
	}
	fmt.Fprintf(w, "outcome: %s\n", st.summary["outcome"])
	if p, ok := st.summary["policy"].(map[string]any); ok {
		fmt.Fprintf(w, "held to: profile sha256 %s, mounts sha256 %s, helper %s\n", fmtVal(p["profile_sha256"]), fmtVal(p["mounts_sha256"]), fmtVal(p["helper_version"]))
		if l, ok := p["limits"]; ok {
			fmt.Fprintf(w, "         limits %s\n", fmtVal(l))
		}
	}
	fmt.Fprintln(w)
	for i, r := range st.recs {
		status := "ok"
		if !r.OK {
			status = "FAILED"
		}
		if !r.Verified {
			status += ", UNVERIFIED"
		}
		fmt.Fprintf(w, "%2d. %-11s %s  %s, seq %d, %s\n", i+1, r.Step, r.Time.UTC().Format("2006-01-02T15:04:05.000000Z"), r.Source, r.Seq, status)
		for _, line := range stepSentences(r.Record) {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// facts reads a record's facts and remembers which were used, so that the
// rest can be listed: the story never hides a fact.
type facts struct {
	m    map[string]any
	used map[string]bool
}

func (f *facts) get(k string) any {
	f.used[k] = true
	return f.m[k]
}

func (f *facts) has(k string) bool {
	_, ok := f.m[k]
	return ok
}

func (f *facts) s(k string) string { return fmtVal(f.get(k)) }

func (f *facts) rest() []string {
	var keys []string
	for k := range f.m {
		if !f.used[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+fmtVal(f.m[k]))
	}
	return out
}

// fmtVal renders a fact value compactly: numbers without exponents, lists
// comma-separated, objects as JSON.
func fmtVal(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return `""`
		}
		return x
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case []any:
		if len(x) == 0 {
			return "none"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmtVal(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

func reapSentence(m map[string]any) string {
	f := &facts{m: m, used: map[string]bool{}}
	return reapText(f)
}

func reapText(f *facts) string {
	var s string
	switch {
	case f.get("timed_out") == true:
		s = "timed out and was killed with " + f.s("signal")
	case f.get("signal") != nil:
		s = "killed by " + f.s("signal")
	default:
		s = "exit code " + f.s("exit_code")
	}
	s += " after " + f.s("duration_ms") + " ms"
	if u, ok := f.get("usage").(map[string]any); ok {
		s += fmt.Sprintf(" (cpu %s ms, max rss %s KiB)", fmtVal(u["cpu_ms"]), fmtVal(u["max_rss_kb"]))
	}
	if f.get("oom_killed") == true {
		s += "; OOM-killed"
	}
	if f.get("quota_exceeded") == true {
		s += "; the workspace quota was exceeded"
	}
	_ = f.get("exit_code")
	return s
}

// stepSentences says what one record asserts, step by step (SCHEMA.md).
func stepSentences(r audit.Record) []string {
	f := &facts{m: r.Facts, used: map[string]bool{}}
	if f.m == nil {
		f.m = map[string]any{}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if !r.OK && r.Error != "" {
		add("error: %s", r.Error)
	}
	switch r.Step {
	case audit.StepAccept:
		add("The request %s %s (%s bytes) was read and decoded strictly; the caller, from the socket's SO_PEERCRED, is uid %d, gid %d, pid %d.",
			f.s("method"), f.s("path"), f.s("body_bytes"), r.CallerUID, r.CallerGID, r.CallerPID)
		_ = f.get("content_length")
		if f.has("code") {
			add("Refused with %s.", f.s("code"))
		}
	case audit.StepDecide:
		if r.OK {
			add("Policy accepted it.")
		} else {
			add("Policy refused it (%s).", f.s("code"))
		}
		if f.has("runtime") {
			add("Runtime %s; code %s bytes, sha256 %s; stdin %s bytes; network %s; session %s.",
				f.s("runtime"), f.s("code_bytes"), f.s("code_sha256"), f.s("stdin_bytes"), f.s("network"), f.s("session"))
		}
		if f.has("file_count") {
			arts := f.s("artifacts")
			if arts == "-" {
				arts = "none"
			}
			add("Files to stage: %s (%s bytes); artifact patterns: %s.", f.s("file_count"), f.s("file_bytes"), arts)
		}
		if f.has("env_names") {
			vals := "values not recorded (--audit-env-values records them)"
			if f.get("env_values_recorded") == true {
				vals = "values: " + f.s("env")
			}
			add("Env names: %s; %s.", f.s("env_names"), vals)
		}
		if f.has("limits") {
			add("Limits decided: %s.", f.s("limits"))
		}
		if f.has("admission") || f.has("session_id") {
			add("Exec slot: %s; session: %s.", f.s("admission"), f.s("session_id"))
		}
	case audit.StepPrepare:
		if f.has("workspace") {
			add("Workspace %s (%s); staged %s files (%s bytes); stdio over %s; cgroup %s.",
				f.s("workspace"), f.s("workspace_kind"), f.s("files"), f.s("file_bytes"), f.s("stdio"), cgroupFact(f))
		}
		if f.has("quota_bytes") {
			add("Workspace disk quota %s bytes.", f.s("quota_bytes"))
		}
		if f.has("limits") {
			add("Limits as applied: %s.", f.s("limits"))
		}
	case audit.StepEnter:
		add("The helper %s (config %s, sha256 %s) ran as euid %s, egid %s for exec %s of caller uid %s (probe: %s).",
			f.s("helper_version"), f.s("config"), f.s("config_sha256"), f.s("euid"), f.s("egid"), f.s("exec_id"), f.s("caller_uid"), f.s("probe"))
		add("Its prelude made the user namespace (inode %s; the helper itself stayed in inode %s) held by pid %s, wrote uid_map %q, gid_map %q, setgroups %s, in %s µs.",
			f.s("userns_inode"), f.s("own_userns_inode"), f.s("holder_pid"), f.s("uid_map"), f.s("gid_map"), f.s("setgroups"), f.s("prelude_us"))
		if f.has("workspace") {
			add("It opened the workspace %s beneath its configured root without following symlinks; runtime %s.", f.s("workspace"), f.s("runtime"))
		}
	case audit.StepNetwork:
		add("In network namespace inode %s (mode %s) the links are %s with addresses %s.", f.s("netns_inode"), f.s("mode"), f.s("links"), f.s("addrs"))
	case audit.StepSeccomp:
		add("Payload profile %s, sha256 %s: %s cBPF instructions (bpf sha256 %s), %s; applied by %s.",
			f.s("profile"), f.s("profile_sha256"), f.s("bpf_instructions"), f.s("bpf_sha256"), f.s("bpf_source"), f.s("applied_by"))
		if f.has("skipped_syscalls") {
			add("Syscalls of the profile unknown to this kernel/libseccomp: %s.", f.s("skipped_syscalls"))
		}
	case audit.StepDrop:
		if f.has("cap_eff") {
			add("Read back from /proc/self/status after the drop: CapInh %s, CapPrm %s, CapEff %s, CapAmb %s, CapBnd %s; %s threads checked with capget.",
				f.s("cap_inh"), f.s("cap_prm"), f.s("cap_eff"), f.s("cap_amb"), f.s("cap_bnd"), f.s("threads_checked"))
		}
		if f.has("no_new_privs") {
			add("no_new_privs reads back %s.", f.s("no_new_privs"))
		}
		if f.has("rlimits") {
			add("Rlimits set: %s.", f.s("rlimits"))
		}
	case audit.StepExec:
		if f.has("argv") {
			add("execve bubblewrap with the argv the helper built: %s", strings.Join(strArgs(f.get("argv")), " "))
			add("bwrap's environment %s; payload env names %s; mounts sha256 %s; profile sha256 %s; helper %s; code sha256 %s.",
				f.s("bwrap_env"), f.s("payload_env_names"), f.s("mounts_sha256"), f.s("profile_sha256"), f.s("helper_version"), f.s("code_sha256"))
		}
	case audit.StepReap:
		if r.OK {
			add("The payload ended: %s.", reapText(f))
			add("stdout %s bytes (truncated: %s), stderr %s bytes (truncated: %s); bwrap's child pid %s; pid namespace gone: %s.",
				f.s("stdout_bytes"), f.s("stdout_truncated"), f.s("stderr_bytes"), f.s("stderr_truncated"), f.s("bwrap_child_pid"), f.s("pid_namespace_gone"))
			if f.has("cgroup_processes_left") {
				add("Processes left in the exec's cgroup once the sandbox's pid 1 was gone: %s.", f.s("cgroup_processes_left"))
			}
		} else if f.has("helper_exit") {
			add("The helper exited %s; its stderr began: %q.", f.s("helper_exit"), f.s("stderr_head"))
		}
	case "artifacts":
		if arts, ok := f.get("artifacts").([]any); ok {
			add("Artifacts for patterns %s (truncated: %s):", f.s("patterns"), f.s("truncated"))
			for _, a := range arts {
				if m, ok := a.(map[string]any); ok {
					add("  %s, %s bytes, sha256 %s", fmtVal(m["path"]), fmtVal(m["size"]), fmtVal(m["sha256"]))
				}
			}
		}
	case audit.StepInterrupted:
		add("Found by the next supervisor at start-up: the last record of the exec was %s (seq %s), accepted at %s.",
			f.s("last_step"), f.s("last_seq"), f.s("accepted_at"))
		_ = f.get("found_at_start_seq")
	}
	if f.has("t_us") {
		add("(reported %s µs into the helper's life)", f.s("t_us"))
	}
	if rest := f.rest(); len(rest) > 0 {
		add("other facts: %s", strings.Join(rest, "; "))
	}
	return out
}

func cgroupFact(f *facts) string {
	if f.has("cgroup_mode") {
		return f.s("cgroup_mode")
	}
	return f.s("cgroup")
}

func strArgs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, a := range list {
		s := fmtVal(a)
		if s == "" || strings.ContainsAny(s, " \t\"'") {
			s = strconv.Quote(s)
		}
		out = append(out, s)
	}
	return out
}
