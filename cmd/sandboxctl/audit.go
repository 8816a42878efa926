package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
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
// else audit/audit.log in $SANDBOXD_STATE_DIR or the default state directory.
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
	intact, factsValid := true, true
	for _, f := range files {
		rep, err := verifyFile(f, audit.VerifyOptions{Partial: *partial})
		res := verifyResult{Path: f, Report: rep}
		if err != nil {
			res.Error = fmt.Sprintf("cannot read the audit log %s: %v", f, err)
			intact = false
		} else {
			intact = intact && rep.Intact
			factsValid = factsValid && rep.FactErrorCount == 0
		}
		results = append(results, res)
	}
	if *asJSON {
		writeIndented(sio.out, map[string]any{"intact": intact, "facts_valid": factsValid, "logs": results})
	} else {
		for i, r := range results {
			if i > 0 {
				fmt.Fprintln(sio.out)
			}
			printVerify(sio.out, r)
		}
	}
	if !intact || !factsValid {
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
	if rep.Launches > 0 {
		fmt.Fprintf(w, "  kernels     %d session kernel launches (those interrupted or without an end are counted above)\n", rep.Launches)
	}
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
	if rep.FactErrorCount > 0 {
		fmt.Fprintf(w, "  facts       %d record(s) not as the schema says (audit/SCHEMA.md):\n", rep.FactErrorCount)
		for _, e := range rep.FactErrors {
			fmt.Fprintf(w, "              %s line %d (seq %d, exec %s): %s\n", e.File, e.Line, e.Seq, e.ExecID, e.Detail)
		}
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
	recs, ids, err := collectRecords(fsys, rep.Chain, verified, func(id string) bool { return strings.HasPrefix(id, want) })
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
	// A warm exec's launch (prepare, the helper's steps) is under the warm
	// sandbox's launch id: the second half of its story.
	var warmRecs []shownRecord
	if launchID := warmLaunchOf(recs); launchID != "" {
		warmRecs, _, err = collectRecords(fsys, rep.Chain, verified, func(id string) bool { return id == launchID })
		if err != nil {
			fmt.Fprintf(sio.err, "sandboxctl: %v\n", err)
			return exitAuditBroken
		}
	}
	execID := recs[0].ExecID
	st := buildStory(execID, recs)
	var warm *story
	if len(warmRecs) > 0 {
		warm = buildStory(warmRecs[0].ExecID, warmRecs)
		if p, ok := warm.summary["policy"].(map[string]any); ok {
			held, _ := st.summary["policy"].(map[string]any)
			if held == nil {
				held = map[string]any{}
			}
			for k, v := range p {
				if _, set := held[k]; !set || k != "limits" {
					held[k] = v // the exec's own limits (warm_exec) win
				}
			}
			st.summary["policy"] = held
		}
	}
	if *asJSON {
		doc := map[string]any{
			"exec_id": execID, "log": *logPath, "log_intact": rep.Intact, "break": rep.Break,
			"skipped": rep.Skipped, "summary": st.summary, "records": recs,
		}
		if warm != nil {
			doc["warm_launch"] = map[string]any{"launch_id": warm.summary["exec_id"], "records": warmRecs}
		}
		writeIndented(sio.out, doc)
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
		if warm != nil {
			fmt.Fprintf(sio.out, "\nwarm sandbox %s: built before the exec, taken by it alone, destroyed after it\n\n", warm.summary["exec_id"])
			warm.printRecords(sio.out)
		}
	}
	if !rep.Intact {
		return exitAuditBroken
	}
	for _, r := range append(recs, warmRecs...) {
		if !r.Verified {
			return exitAuditBroken
		}
	}
	return exitOK
}

// collectRecords reads the records whose exec id match accepts.
func collectRecords(fsys fs.FS, chain []string, verified map[string]bool, match func(string) bool) ([]shownRecord, map[string]bool, error) {
	var recs []shownRecord
	ids := map[string]bool{}
	_, err := audit.ReadRecords(fsys, chain, func(file string, line int, r audit.Record) {
		if r.ExecID == "" || !match(r.ExecID) {
			return
		}
		ids[r.ExecID] = true
		if m := r.FactMap(); m != nil {
			r.Facts = m // --json prints facts as an object with sorted keys, as it always did
		}
		recs = append(recs, shownRecord{File: file, Line: line, Verified: verified[file+":"+strconv.Itoa(line)], Record: r})
	})
	return recs, ids, err
}

// warmLaunchOf is the launch id a warm exec's warm_exec record names.
func warmLaunchOf(recs []shownRecord) string {
	for _, r := range recs {
		if r.Step == audit.StepWarmExec {
			if id, _ := r.FactMap()["launch_id"].(string); id != "" {
				return id
			}
		}
	}
	return ""
}

// story is an exec's records turned into sentences: the sentences come
// from the step types (facts.Describe), the summary from their typed facts.
type story struct {
	recs    []shownRecord
	summary map[string]any
}

func buildStory(id string, recs []shownRecord) *story {
	st := &story{recs: recs, summary: map[string]any{"exec_id": id}}
	held := map[string]any{}
	outcome := "no end recorded: the exec is still running, or its supervisor died and has not been restarted"
	for _, r := range recs {
		raw, _ := r.RawFacts()
		f := facts.Lenient(r.Step, raw) // a fact not in the schema is shown per record, not here
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
			if l, ok := r.FactMap()["limits"]; ok && held["limits"] == nil {
				held["limits"] = l
			}
		case audit.StepPrepare:
			if l, ok := r.FactMap()["limits"]; ok {
				held["limits"] = l // as applied by the launcher
			}
			if !r.OK {
				outcome = "the launch failed while preparing: " + r.Error
			}
		case audit.StepWarmExec:
			if l, ok := r.FactMap()["limits"]; ok {
				held["limits"] = l // as set on the warm sandbox's cgroup
			}
		case audit.StepSeccomp:
			if sf, ok := f.(*facts.Seccomp); ok && sf.ProfileSHA256 != "" {
				held["profile_sha256"] = sf.ProfileSHA256
			}
		case audit.StepExec:
			if xf, ok := f.(*facts.Exec); ok && r.OK {
				a := xf.Attestation()
				held["profile_sha256"], held["mounts_sha256"], held["helper_version"] = a.ProfileSHA256, a.MountsSHA256, a.HelperVersion
			}
		case audit.StepReap:
			if rf, ok := f.(*facts.Reap); ok && r.OK {
				outcome = "ran: " + rf.Outcome()
			} else if !r.OK {
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
		fmt.Fprintf(w, "held to: profile sha256 %s, mounts sha256 %s, helper %s\n", facts.Format(p["profile_sha256"]), facts.Format(p["mounts_sha256"]), facts.Format(p["helper_version"]))
		if l, ok := p["limits"]; ok {
			fmt.Fprintf(w, "         limits %s\n", facts.Format(l))
		}
	}
	fmt.Fprintln(w)
	st.printRecords(w)
}

// printRecords prints each record with what it asserts.
func (st *story) printRecords(w io.Writer) {
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

// stepSentences says what one record asserts (SCHEMA.md), from its step's
// sentence templates.
func stepSentences(r audit.Record) []string {
	var out []string
	if !r.OK && r.Error != "" {
		out = append(out, "error: "+r.Error)
	}
	extra := map[string]string{"caller": fmt.Sprintf("uid %d, gid %d, pid %d", r.CallerUID, r.CallerGID, r.CallerPID)}
	raw, _ := r.RawFacts()
	return append(out, facts.Describe(r.Step, r.OK, raw, extra)...)
}
