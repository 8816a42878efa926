package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit/facts"
)

// Kinds of break the verifier names.
const (
	BreakUnreadable  = "unreadable"   // a file of the chain cannot be read
	BreakMissingFile = "missing-file" // a rotated file the chain links to is gone
	BreakMalformed   = "malformed"    // a line that is not a hashed record
	BreakUnchained   = "unchained"    // a record written before the hash chain (schema 1)
	BreakEdited      = "edited"       // a record whose bytes do not match its hash
	BreakDeleted     = "deleted"      // records missing from the middle of the chain
	BreakReordered   = "reordered"    // records swapped or moved
	BreakDuplicated  = "duplicated"   // a record repeated
	BreakReplaced    = "replaced"     // a record with the right seq but another predecessor
	BreakTruncated   = "truncated"    // records or bytes removed from the end
	BreakHeader      = "bad-header"   // a file that does not begin with its header
	BreakMissingHead = "missing-head" // the head file of the active log is gone
	BreakHead        = "head-mismatch"
)

// maxLine bounds one record; the supervisor's are far smaller (the helper's
// reports are cut at 1 MiB).
const maxLine = 8 << 20

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Partial accepts a chain whose oldest file links to a predecessor that
	// is missing (pruned by the operator) or that the supervisor set aside
	// as broken: verification starts at that link and says so in Skipped.
	Partial bool
	// Visit, when set, is called for every record that verified, in chain
	// order, with the file it is in and its line number.
	Visit func(file string, line int, r Record)

	// ChainOnly skips the check of every record's facts against its step's
	// type (Report.FactErrors), for callers that ask only whether the chain
	// is intact: the tamper tests, which verify tens of thousands of
	// mutated logs.
	ChainOnly bool

	// fileOnly verifies the named file alone, taking its header's link on
	// trust (the writer's check at start-up).
	fileOnly bool
}

// Break is the first point at which the log is not what the writer wrote.
type Break struct {
	File   string `json:"file"`
	Line   int    `json:"line"`   // 1-based line; one past the last line for a break at the end
	Offset int64  `json:"offset"` // byte offset of that line in File
	Seq    uint64 `json:"seq"`    // the seq expected at this point
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (b *Break) Error() string {
	return fmt.Sprintf("%s line %d (byte %d, expected seq %d): %s: %s", b.File, b.Line, b.Offset, b.Seq, b.Kind, b.Detail)
}

// FileReport describes one file of the chain.
type FileReport struct {
	Name      string `json:"name"`
	FileIndex int    `json:"file_index"`
	Reason    string `json:"reason"` // why the file was begun: new, size, broken, missing
	Records   int    `json:"records"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Bytes     int64  `json:"bytes"`
	Rotated   bool   `json:"rotated"` // ends with its rotate record
}

// OpenExec is an exec that was accepted and has no terminal record yet.
type OpenExec struct {
	ExecID    string    `json:"exec_id"`
	CallerUID int       `json:"caller_uid"`
	CallerGID int       `json:"caller_gid"`
	CallerPID int       `json:"caller_pid"`
	LastStep  string    `json:"last_step"`
	LastSeq   uint64    `json:"last_seq"`
	Since     time.Time `json:"since"`
	// Launch: the trail began at a prepare, not an accept (a kernel).
	Launch bool `json:"launch,omitempty"`
}

// Report is the result of Verify. When Break is nil the chain is intact
// from its first record (or, with Partial, from the link it starts at) to
// its end as proven by the head file or a rotate record.
type Report struct {
	Intact bool   `json:"intact"`
	LogID  string `json:"log_id,omitempty"`
	// Chain is every file of the chain, oldest first, as the headers link
	// them; Files are those that verified completely.
	Chain    []string     `json:"chain"`
	Files    []FileReport `json:"files"`
	Records  int          `json:"records"`
	FirstSeq uint64       `json:"first_seq"`
	LastSeq  uint64       `json:"last_seq"`
	// Head is the hash of the last record that verified.
	Head string    `json:"head_hash,omitempty"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Execs counts accepted execs, then how they ended.
	Execs       int        `json:"execs"`
	Ran         int        `json:"ran"`         // reaped after the payload ran
	Failed      int        `json:"failed"`      // the launch failed (prepare, helper or bwrap)
	Refused     int        `json:"refused"`     // refused at accept or decide
	Interrupted int        `json:"interrupted"` // the supervisor stopped before the reap (kernels included)
	Launches    int        `json:"launches"`    // long-lived launches without an accept (session kernels)
	Open        []OpenExec `json:"open"`        // still running, or lost with a supervisor not yet restarted
	Probes      int        `json:"probes"`      // health probes (helper records without accept)
	Starts      int        `json:"starts"`
	CleanStop   bool       `json:"clean_stop"` // the last record is a stop record
	// Tail says how the end was proven: "head file" or "rotate record".
	Tail    string   `json:"tail,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	Break   *Break   `json:"break,omitempty"`
	// FactErrors are records that verified (the chain is intact there)
	// whose facts are not what their step's type in package audit/facts
	// says: a fact it does not define, one an ok record requires and lacks,
	// or a value of the wrong type. At most maxFactErrors are listed;
	// FactErrorCount counts them all.
	FactErrors     []FactError `json:"fact_errors,omitempty"`
	FactErrorCount int         `json:"fact_error_count,omitempty"`

	lastStep  string
	fileIndex int
}

// FactError is a record whose facts do not match its step's schema.
type FactError struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Seq    uint64 `json:"seq"`
	ExecID string `json:"exec_id"`
	Step   string `json:"step"`
	Detail string `json:"detail"`
}

// maxFactErrors bounds Report.FactErrors.
const maxFactErrors = 20

// Valid reports whether the chain is intact and every record's facts are
// as the schema says (what `sandboxctl audit verify` exits 0 for).
func (r *Report) Valid() bool { return r.Intact && r.FactErrorCount == 0 }

// checkFacts decodes a verified record's facts strictly (Record.DecodeFacts).
// The session, file and log records have no typed facts and are not
// checked. The writer's check at start-up skips this: a record that is not
// as the schema says is a finding for an auditor, not a reason to set the
// log aside.
func (v *verifier) checkFacts(name string, lineNo int, r Record) {
	if v.o.fileOnly || v.o.ChainOnly {
		return
	}
	_, err := r.DecodeFacts()
	if err == nil || errors.Is(err, facts.ErrUntyped) {
		return
	}
	v.rep.FactErrorCount++
	if len(v.rep.FactErrors) < maxFactErrors {
		v.rep.FactErrors = append(v.rep.FactErrors, FactError{File: name, Line: lineNo, Seq: r.Seq, ExecID: r.ExecID, Step: r.Step, Detail: err.Error()})
	}
}

// Verify checks the audit log chain that ends with the file name in fsys
// (the active log, or a rotated file), following each file's header back
// to the start of the chain. It returns an error only when name itself
// cannot be read; everything else is a Break in the report.
func Verify(fsys fs.FS, name string, o VerifyOptions) (*Report, error) {
	if _, err := fs.Stat(fsys, name); err != nil {
		return nil, err
	}
	files, missing, skipped, loopBreak := []string{name}, "", []string(nil), (*Break)(nil)
	if !o.fileOnly {
		files, missing, skipped, loopBreak = discover(fsys, name, o.Partial)
	}
	v := &verifier{fsys: fsys, o: o, rep: &Report{Chain: files, Skipped: skipped}, open: map[string]*OpenExec{}, terminalSeen: map[string]bool{}}
	if loopBreak != nil {
		v.rep.Break = loopBreak
	} else {
		v.run(files, missing)
	}
	v.finish()
	return v.rep, nil
}

// link is what a file's header says about its predecessor.
type link struct {
	genesis  bool
	prevFile string
	reason   string
	ok       bool
}

// readHeader reads and decodes the first line of a file, without verifying
// anything (the forward pass does that).
func readHeader(fsys fs.FS, name string) (Record, bool) {
	var r Record
	f, err := fsys.Open(name)
	if err != nil {
		return r, false
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxLine), 4096).ReadBytes('\n')
	if err != nil {
		return r, false
	}
	if json.Unmarshal(line, &r) != nil || r.Step != StepHeader {
		return r, false
	}
	return r, true
}

// readLink returns what a file's header says about its predecessor.
func readLink(fsys fs.FS, name string) link {
	r, ok := readHeader(fsys, name)
	if !ok {
		return link{}
	}
	l := link{ok: true, reason: factString(r.FactMap(), "reason")}
	l.prevFile = factString(r.FactMap(), "prev_file")
	l.genesis = r.Seq == 0 && r.PrevHash == ZeroHash && l.prevFile == ""
	return l
}

// discover walks back from name through the headers' prev_file links and
// returns the chain's files, oldest first, and the predecessor that is
// missing, if any.
func discover(fsys fs.FS, name string, partial bool) (files []string, missing string, skipped []string, brk *Break) {
	files = []string{name}
	seen := map[string]bool{name: true}
	cur := name
	for {
		l := readLink(fsys, cur)
		if !l.ok || l.genesis || l.prevFile == "" {
			return files, "", skipped, nil
		}
		if strings.Contains(l.prevFile, "/") || l.prevFile == "." || l.prevFile == ".." {
			return files, "", skipped, &Break{File: cur, Line: 1, Kind: BreakHeader,
				Detail: fmt.Sprintf("its header names %q as its predecessor, which is not a file name beside it", l.prevFile)}
		}
		prev := path.Join(path.Dir(cur), l.prevFile)
		if partial && (l.reason == reasonBroken || l.reason == reasonMissing) {
			skipped = append(skipped, fmt.Sprintf("%s and everything before it (the supervisor found it %s and began %s)", prev, l.reason, cur))
			return files, "", skipped, nil
		}
		if seen[prev] {
			return files, "", skipped, &Break{File: cur, Line: 1, Kind: BreakHeader,
				Detail: fmt.Sprintf("its header names %s as its predecessor, which is already part of the chain: the files' links form a loop", prev)}
		}
		if _, err := fs.Stat(fsys, prev); err != nil {
			if partial {
				skipped = append(skipped, fmt.Sprintf("%s and everything before it (not present)", prev))
			}
			return files, prev, skipped, nil
		}
		seen[prev] = true
		files = append([]string{prev}, files...)
		cur = prev
	}
}

type position struct {
	seq  uint64
	hash string
	ok   bool
}

type verifier struct {
	fsys fs.FS
	o    VerifyOptions
	rep  *Report

	started bool
	expSeq  uint64
	last    position // the last record that verified
	before  position // the one before it
	open    map[string]*OpenExec
	// pendingMissing is the missing-file break of a chain whose oldest
	// file links to missingName, reported at the end unless a prune record
	// names that file.
	pendingMissing *Break
	missingName    string
	// The head file of the chain's last file, read before that file.
	head        *head
	headErr     error
	headSeen    bool // a record with the head's seq was verified
	headMatched bool // ... and its hash is the head's
	// terminalSeen remembers execs already ended, so that late records of
	// an exec (none are expected) do not count it twice.
	terminalSeen map[string]bool
}

func (v *verifier) brk(file string, line int, off int64, kind, format string, args ...any) {
	v.rep.Break = &Break{File: file, Line: line, Offset: off, Seq: v.expSeq, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

func (v *verifier) run(files []string, missing string) {
	for i, name := range files {
		if !v.file(name, i, files, missing) {
			return
		}
	}
	if v.pendingMissing != nil {
		v.rep.Break = v.pendingMissing
	}
}

// pruned clears the pending missing-file break when r, a verified prune
// record, names the missing predecessor among the files audit retention
// deleted: the gap is then the writer's own, stated in the chain before
// the files went.
func (v *verifier) pruned(r Record) {
	if v.pendingMissing == nil || r.Step != StepPrune {
		return
	}
	deleted, _ := r.FactMap()["deleted"].([]any)
	for _, d := range deleted {
		if d == v.missingName {
			v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s and the files before it were deleted by audit retention (prune record seq %d); verification starts at %s",
				v.missingName, r.Seq, v.pendingMissing.File))
			v.pendingMissing = nil
			return
		}
	}
}

// file verifies one file of the chain; false when it found a break.
func (v *verifier) file(name string, idx int, files []string, missing string) bool {
	f, err := v.fsys.Open(name)
	if err != nil {
		v.brk(name, 0, 0, BreakUnreadable, "cannot read it: %v", err)
		return false
	}
	defer f.Close()
	if idx == len(files)-1 {
		v.loadHead(name)
	}
	rd := bufio.NewReaderSize(f, 32<<10)
	fr := FileReport{Name: name}
	var off int64
	lineNo := 0
	var lastRec Record
	for {
		raw, err := readLine(rd)
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			break
		}
		lineNo++
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				v.brk(name, lineNo, off, BreakMalformed, "a line longer than %d bytes: not a record sandboxd writes", maxLine)
			} else {
				v.brk(name, lineNo, off, BreakUnreadable, "read error: %v", err)
			}
			return false
		}
		if errors.Is(err, io.EOF) {
			// Bytes after the last newline.
			v.brk(name, lineNo, off, BreakTruncated,
				"the file ends in an incomplete record (%d bytes without a newline): its end was cut off, or a write was torn by a crash", len(raw))
			return false
		}
		lineLen := int64(len(raw))
		raw = raw[:len(raw)-1]
		r, hash, ok := v.record(name, lineNo, off, raw)
		if !ok {
			return false
		}
		if !v.chain(name, lineNo, off, r, hash, rd, idx, files, missing) {
			return false
		}
		if v.head != nil && r.Seq == v.head.Seq {
			v.headSeen, v.headMatched = true, hash == v.head.Hash
		}
		if lineNo == 1 {
			fr.FileIndex = factInt(r.FactMap(), "file_index")
			fr.Reason = factString(r.FactMap(), "reason")
			fr.FirstSeq = r.Seq
			v.rep.fileIndex = fr.FileIndex
		}
		fr.Records++
		fr.LastSeq = r.Seq
		lastRec = r
		v.pruned(r)
		v.account(r)
		v.checkFacts(name, lineNo, r)
		if v.o.Visit != nil {
			v.o.Visit(name, lineNo, r)
		}
		off += lineLen
	}
	fr.Bytes = off
	if fr.Records == 0 {
		v.brk(name, 1, 0, BreakTruncated, "the file is empty: every record of it was removed")
		return false
	}
	fr.Rotated = lastRec.Step == StepRotate
	v.rep.Files = append(v.rep.Files, fr)
	if idx < len(files)-1 {
		if !fr.Rotated {
			next := files[idx+1]
			if hdr, ok := readHeader(v.fsys, next); ok && factString(hdr.FactMap(), "reason") == reasonBroken {
				// The supervisor found this file broken at start-up (its
				// head file no longer names it, so its end is proven by
				// nothing): the break it recorded stands.
				kind := BreakTruncated
				if b, ok := hdr.FactMap()["break"].(map[string]any); ok && factString(b, "kind") != "" {
					kind = factString(b, "kind")
				}
				v.brk(name, lineNo+1, off, kind, "the supervisor found this file broken and set it aside (header of %s): %s", next, hdr.Error)
				return false
			}
			v.brk(name, lineNo+1, off, BreakTruncated,
				"it does not end with its rotate record although the chain continues in %s: records were removed from its end", next)
			return false
		}
		return true
	}
	// The end of the chain.
	if fr.Rotated {
		v.rep.Tail = "rotate record"
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s was rotated away (renamed %s); the files after it were not examined", name, factString(lastRec.FactMap(), "renamed_to")))
		return true
	}
	return v.checkHead(name, lineNo+1, off)
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line including its newline; at the end of the
// input it returns what is left (without a newline) and io.EOF.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > maxLine {
			return out, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

// record checks one line's form and hash and decodes it.
func (v *verifier) record(name string, lineNo int, off int64, raw []byte) (Record, string, bool) {
	var r Record
	body, stated, ok := splitLine(raw)
	if !ok {
		var old struct {
			V *int `json:"v"`
		}
		if json.Unmarshal(raw, &old) == nil && old.V != nil && *old.V < 2 {
			v.brk(name, lineNo, off, BreakUnchained, "a schema %d record, written before the audit log was hash-chained: nothing before the chain can be verified", *old.V)
		} else if len(raw) == 0 {
			v.brk(name, lineNo, off, BreakMalformed, "an empty line: bytes were inserted or a record was blanked")
		} else {
			v.brk(name, lineNo, off, BreakMalformed, "not a hashed record (it does not end with ,\"hash\":\"<64 hex>\"}): it was edited, or was not written by sandboxd")
		}
		return r, "", false
	}
	if got := lineHash(body); got != stated {
		v.brk(name, lineNo, off, BreakEdited, "its bytes do not match its hash (sha256 %s, the line says %s): the record was edited after it was written", got[:16]+"…", stated[:16]+"…")
		return r, "", false
	}
	r, err := decodeRecord(raw)
	if err != nil {
		v.brk(name, lineNo, off, BreakMalformed, "not a valid record: %v", err)
		return r, "", false
	}
	if IsLogRecord(r.Step) {
		// The log records' facts are read here (links, open execs).
		raw, _ := r.Facts.(json.RawMessage)
		var m map[string]any
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &m); err != nil {
				v.brk(name, lineNo, off, BreakMalformed, "its facts are not a JSON object: %v", err)
				return r, "", false
			}
		}
		r.Facts = m
	}
	if r.Hash != stated || r.V < 2 {
		v.brk(name, lineNo, off, BreakMalformed, "its hash field or schema version is inconsistent")
		return r, "", false
	}
	return r, stated, true
}

// chain checks r's place in the chain.
func (v *verifier) chain(name string, lineNo int, off int64, r Record, hash string, rd *bufio.Reader, idx int, files []string, missing string) bool {
	if !v.started {
		// The first record of the chain must be the header of the oldest file.
		if r.Step != StepHeader {
			v.expSeq = 0
			if r.Seq > 0 {
				if at := findSeq(rd, r.Seq-1); at > 0 {
					v.brk(name, lineNo, off, BreakReordered, "the file begins with a %q record (seq %d); seq %d comes %d line(s) later: records were swapped or moved", r.Step, r.Seq, r.Seq-1, at)
					return false
				}
			}
			v.brk(name, lineNo, off, BreakHeader, "the chain's first record is a %q record (seq %d), not a header: the file's beginning was removed", r.Step, r.Seq)
			return false
		}
		genesis := r.Seq == 0 && r.PrevHash == ZeroHash && factString(r.FactMap(), "prev_file") == ""
		if !genesis {
			prev := factString(r.FactMap(), "prev_file")
			switch {
			case v.o.Partial:
				v.rep.Skipped = appendOnce(v.rep.Skipped, fmt.Sprintf("verification starts at %s seq %d, which continues from %s (seq %d, hash %s); that link is taken on trust",
					name, r.Seq, orNone(prev), r.Seq-1, r.PrevHash))
			case missing != "":
				// A break unless a prune record later in the chain
				// names the file: audit retention deleted it (see
				// pruned).
				v.pendingMissing = &Break{File: name, Line: lineNo, Offset: off, Seq: r.Seq, Kind: BreakMissingFile,
					Detail: fmt.Sprintf("it continues from %s (seq %d, hash %s…), which does not exist: a rotated file was removed",
						missing, r.Seq-1, r.PrevHash[:min(16, len(r.PrevHash))])}
				v.missingName = path.Base(missing)
			default:
				v.expSeq = r.Seq
				detail := factString(r.FactMap(), "reason")
				v.brk(name, lineNo, off, BreakMissingFile, "it continues from seq %d (hash %s…) of a log that is not present (header reason %q: %s)",
					r.Seq-1, r.PrevHash[:min(16, len(r.PrevHash))], detail, r.Error)
				return false
			}
		}
		v.rep.LogID = factString(r.FactMap(), "log_id")
		v.rep.FirstSeq = r.Seq
		v.rep.From = r.Time
		v.seedOpen(r)
		v.started = true
		v.advance(r.Seq, hash)
		return true
	}
	if r.Seq != v.expSeq || r.PrevHash != v.last.hash {
		v.classify(name, lineNo, off, r, hash, rd, idx > 0 && lineNo == 1)
		return false
	}
	if lineNo == 1 && r.Step != StepHeader {
		// Unreachable when the chain links hold (a header is always first),
		// kept as a belt to the braces above.
		v.brk(name, lineNo, off, BreakHeader, "the file begins with a %q record, not its header", r.Step)
		return false
	}
	if lineNo > 1 && r.Step == StepHeader {
		v.brk(name, lineNo, off, BreakReordered, "a header record in the middle of a file: records of another file were moved here")
		return false
	}
	if r.Step == StepHeader {
		if id := factString(r.FactMap(), "log_id"); id != v.rep.LogID {
			v.brk(name, lineNo, off, BreakHeader, "its header belongs to log %s, not to this chain's log %s", id, v.rep.LogID)
			return false
		}
		if reason := factString(r.FactMap(), "reason"); reason == reasonBroken || reason == reasonMissing {
			v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s was begun because the supervisor found the log %s: %s", name, reason, r.Error))
		}
	}
	v.advance(r.Seq, hash)
	return true
}

func (v *verifier) advance(seq uint64, hash string) {
	v.before = v.last
	v.last = position{seq: seq, hash: hash, ok: true}
	v.expSeq = seq + 1
}

// classify names a chain break at r: what is missing or out of place.
func (v *verifier) classify(name string, lineNo int, off int64, r Record, hash string, rd *bufio.Reader, fileStart bool) {
	exp := v.expSeq
	switch {
	case r.Seq == exp:
		v.brk(name, lineNo, off, BreakReplaced, "seq %d is chained to a record other than the seq %d before it (prev_hash %s…, the record before hashes to %s…): a record was replaced or a file swapped",
			r.Seq, exp-1, short(r.PrevHash), short(v.last.hash))
	case r.Seq > exp:
		if at := findSeq(rd, exp); at > 0 {
			v.brk(name, lineNo, off, BreakReordered, "seq %d stands where seq %d belongs; seq %d comes %d line(s) later: records were swapped or moved", r.Seq, exp, exp, at)
			return
		}
		n := r.Seq - exp
		where := "before this line"
		if fileStart {
			where = "at the end of the previous file or the start of this one"
		}
		v.brk(name, lineNo, off, BreakDeleted, "seq %d follows seq %d: %d record(s) (seq %d..%d) were deleted %s", r.Seq, exp-1, n, exp, r.Seq-1, where)
	default:
		if r.Seq == v.last.seq && hash == v.last.hash {
			v.brk(name, lineNo, off, BreakDuplicated, "seq %d appears twice: the record was repeated", r.Seq)
			return
		}
		v.brk(name, lineNo, off, BreakReordered, "seq %d stands after seq %d: records were swapped or moved (or an old record replayed)", r.Seq, exp-1)
	}
}

// findSeq looks ahead in the rest of the file for a record with seq; it
// returns how many lines later it is, or 0.
func findSeq(rd *bufio.Reader, seq uint64) int {
	for n := 1; ; n++ {
		raw, err := readLine(rd)
		if len(raw) > 0 {
			var s struct {
				Seq *uint64 `json:"seq"`
			}
			if json.Unmarshal(bytes.TrimSuffix(raw, []byte("\n")), &s) == nil && s.Seq != nil && *s.Seq == seq {
				return n
			}
		}
		if err != nil {
			return 0
		}
	}
}

// loadHead reads the head file of the chain's last file before that file
// is verified, so each of its records can be checked against it.
func (v *verifier) loadHead(name string) {
	b, err := fs.ReadFile(v.fsys, HeadPath(name))
	if err != nil {
		v.headErr = err
		return
	}
	h, err := parseHead(b)
	if err != nil {
		v.headErr = err
		return
	}
	v.head = &h
	// Right after a rotation the head may still name the previous file's
	// last record.
	if v.last.ok && v.last.seq == h.Seq {
		v.headSeen, v.headMatched = true, v.last.hash == h.Hash
	}
}

// checkHead proves the end of the active log with its head file. The head
// names the last record known durable; records after it are accepted (a
// write in progress, or records a crash left unsynced), but the log may
// never end before it: that is a truncation.
func (v *verifier) checkHead(name string, line int, off int64) bool {
	hp := HeadPath(name)
	if v.head == nil {
		if errors.Is(v.headErr, fs.ErrNotExist) {
			v.brk(name, line, off, BreakMissingHead, "its head file %s does not exist: the end of the log cannot be proven, and records removed from its end would go unnoticed; keep the head file with the log", hp)
		} else {
			v.brk(name, line, off, BreakHead, "%s: %v", hp, v.headErr)
		}
		return false
	}
	h := *v.head
	if h.LogID != v.rep.LogID {
		v.brk(name, line, off, BreakHead, "the head file %s belongs to log %s, not %s", hp, h.LogID, v.rep.LogID)
		return false
	}
	switch {
	case h.Seq > v.last.seq:
		v.brk(name, line, off, BreakTruncated, "the head file says the log reached seq %d (hash %s…), but it ends at seq %d: %d record(s) were removed from its end",
			h.Seq, short(h.Hash), v.last.seq, h.Seq-v.last.seq)
		return false
	case !v.headSeen:
		v.brk(name, line, off, BreakHead, "the head file names seq %d, which is not in %s (it holds seq %d..%d)", h.Seq, name, v.rep.Files[len(v.rep.Files)-1].FirstSeq, v.last.seq)
		return false
	case !v.headMatched:
		v.brk(name, line, off, BreakHead, "the head file names seq %d with hash %s…, but the record seq %d of the log is another one: the log's end was replaced", h.Seq, short(h.Hash), h.Seq)
		return false
	case h.Seq < v.last.seq:
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%d record(s) after seq %d are newer than the head file: they were being written, or a crash came before they were synced", v.last.seq-h.Seq, h.Seq))
	}
	v.rep.Tail = "head file"
	return true
}

// seedOpen takes the execs that were open at the start of a file the chain
// begins with (Partial), from its header.
func (v *verifier) seedOpen(r Record) {
	for _, o := range headerOpenExecs(r) {
		o := o
		v.open[o.ExecID] = &o
	}
}

func headerOpenExecs(r Record) []OpenExec {
	raw, ok := r.FactMap()["open_execs"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var out []OpenExec
	_ = json.Unmarshal(b, &out)
	return out
}

// account updates the exec and log counters with a verified record.
func (v *verifier) account(r Record) {
	rep := v.rep
	rep.Records++
	rep.LastSeq = r.Seq
	rep.Head = v.last.hash
	rep.To = r.Time
	rep.lastStep = r.Step
	if r.Step == StepStart {
		rep.Starts++
	}
	if r.ExecID == "" || IsLogRecord(r.Step) {
		return
	}
	if strings.HasPrefix(r.ExecID, "probe-") {
		// A health probe is not an exec. It is counted once: at its accept
		// (probes leave a full trail) or, in logs from before that, at the
		// helper's enter record.
		if r.Step == StepAccept || (r.Step == StepEnter && !v.terminalSeen[r.ExecID]) {
			rep.Probes++
		}
		v.terminalSeen[r.ExecID] = true
		return
	}
	o, isOpen := v.open[r.ExecID]
	if OpensTrail(r) && !isOpen && !v.terminalSeen[r.ExecID] {
		o = &OpenExec{ExecID: r.ExecID, CallerUID: r.CallerUID, CallerGID: r.CallerGID, CallerPID: r.CallerPID, Since: r.Time,
			Launch: r.Step != StepAccept}
		if o.Launch {
			rep.Launches++
		} else {
			rep.Execs++
		}
		v.open[r.ExecID] = o
		isOpen = true
	}
	if !isOpen {
		return
	}
	o.LastStep, o.LastSeq = r.Step, r.Seq
	if !Terminal(r) {
		return
	}
	delete(v.open, r.ExecID)
	v.terminalSeen[r.ExecID] = true
	switch {
	case r.Step == StepInterrupted:
		rep.Interrupted++
	case o.Launch: // a kernel's end is not an exec's outcome
	case r.Step == StepReap && r.OK:
		rep.Ran++
	case r.Step == StepAccept || r.Step == StepDecide:
		rep.Refused++
	default:
		rep.Failed++
	}
}

func (v *verifier) finish() {
	rep := v.rep
	rep.Intact = rep.Break == nil
	rep.CleanStop = rep.lastStep == StepStop
	rep.Open = openList(v.open)
}

func openList(m map[string]*OpenExec) []OpenExec {
	out := make([]OpenExec, 0, len(m))
	for _, o := range m {
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastSeq < out[j].LastSeq })
	return out
}

func factString(f map[string]any, k string) string {
	s, _ := f[k].(string)
	return s
}

func factInt(f map[string]any, k string) int {
	switch n := f[k].(type) {
	case float64:
		return int(n)
	case int:
		return n
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return 0
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

func orNone(s string) string {
	if s == "" {
		return "(no file named)"
	}
	return s
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// ReadRecords calls fn for every line of the files that decodes as a record,
// verified or not (for showing what a broken log still says), and returns
// how many lines did not decode.
func ReadRecords(fsys fs.FS, files []string, fn func(file string, line int, r Record)) (bad int, err error) {
	for _, name := range files {
		f, err := fsys.Open(name)
		if err != nil {
			return bad, err
		}
		rd := bufio.NewReaderSize(f, 32<<10)
		for n := 1; ; n++ {
			raw, err := readLine(rd)
			if len(bytes.TrimSpace(raw)) > 0 {
				if r, err := decodeRecord(raw); err == nil {
					fn(name, n, r)
				} else {
					bad++
				}
			}
			if err != nil {
				break
			}
		}
		f.Close()
	}
	return bad, nil
}

// decodeRecord decodes one line. Its facts stay raw (json.RawMessage):
// Record.DecodeFacts types them where they are read, so a verify of a long
// log does not spend its time building maps.
func decodeRecord(raw []byte) (Record, error) {
	var x struct {
		Record
		Facts json.RawMessage `json:"facts"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&x); err != nil {
		return Record{}, err
	}
	if dec.More() {
		return Record{}, errors.New("data after the record")
	}
	r := x.Record
	if len(x.Facts) > 0 {
		r.Facts = x.Facts
	}
	return r, nil
}
