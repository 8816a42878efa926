package audit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	stepfacts "github.com/sandboxd/sandboxd/audit/facts"
)

// Why a file of the chain was begun (the header's facts.reason).
const (
	reasonNew     = "new"     // a new chain
	reasonSize    = "size"    // the previous file reached the rotation size
	reasonBroken  = "broken"  // the previous file failed verification at start-up and was set aside
	reasonMissing = "missing" // the log was missing or empty at start-up although its head file was not
)

// StartFacts are the supervisor's settings its start record names: where
// it listens and keeps its state, which helper and helper config it runs,
// and whether env values are audited (--audit-env-values).
type StartFacts struct {
	Socket         string
	StateDir       string
	Helper         string
	HelperConfig   string
	AuditEnvValues bool
}

// Options configure a FileWriter.
type Options struct {
	// Fsync makes records durable (fdatasync) at the barriers that matter,
	// so a record the supervisor acted on survives a crash or power loss:
	// a launch story's records before its last barrier (Deferred) are
	// appended at once and made durable by the next Sync or synced Write
	// (one fdatasync covers every record appended before it: group
	// commit); every other record is durable before Write returns.
	Fsync bool
	// SyncEveryRecord (with Fsync) makes every record durable before Write
	// returns, Deferred or not: the behaviour before barriers, kept for the
	// benchmark's comparison.
	SyncEveryRecord bool
	// RotateBytes starts a new file once the current one would grow past
	// this size; 0 never rotates.
	RotateBytes int64
	// RetentionFiles keeps at most this many rotated files (<base>.<N>):
	// after a rotation, and at Open, the oldest beyond it are deleted once
	// a prune record naming them is durable. 0 keeps every file.
	RetentionFiles int
	// Syslog, when set, is a Unix datagram socket (e.g. /dev/log) to which
	// every record is also forwarded as an RFC 5424 message.
	Syslog string
	// Version is the supervisor's version, recorded in headers and start records.
	Version string
	// StartFacts are added to the start record (the supervisor's settings).
	StartFacts *StartFacts
	// Log receives what the writer found when opening the log; nil discards.
	Log *slog.Logger
}

// OpenInfo says what Open found and did.
type OpenInfo struct {
	// State is "new", "continued", "set-aside" (the log failed verification
	// and was renamed; a new file links to it), "rotation-finished" (the
	// previous supervisor died mid-rotation) or "missing" (the log was gone
	// or empty although its head file was not).
	State string
	// SetAside is the name the broken log was renamed to.
	SetAside string
	// Break is why the log was set aside.
	Break *Break
	// PreviousShutdown is "clean" (the log ended with a stop record),
	// "unclean", or "" for a new log.
	PreviousShutdown string
	// Interrupted are the execs closed with an interrupted record.
	Interrupted []string
}

// FileWriter appends hash-chained records to the audit log, one JSON object
// per line; see SCHEMA.md. It is safe for concurrent use.
type FileWriter struct {
	mu   sync.Mutex
	path string
	dir  string
	base string
	o    Options

	f           *os.File
	fd          int
	hf          *os.File // head file, also the writer's lock
	size        int64
	fileRecords int
	seq         uint64 // of the next record
	prev        string // hash of the last record
	logID       string
	fileIndex   int
	open        map[string]*OpenExec

	count  uint64
	err    error // sticky: once a write failed, nothing more is appended
	closed bool
	fwd    *Syslog
	opened OpenInfo

	// The head file names the last record known durable (or, without
	// fsync, written); it never goes backwards.
	headSeq uint64
	headSet bool
	// gen changes whenever the file is synced and closed (rotation, Close),
	// so a group sync that finds its file closed knows it was synced.
	gen uint64

	// Group commit: Write appends under mu, then waits in syncTo, where one
	// fdatasync makes durable every record appended before it started.
	// syncMu serialises the syncs; synced is guarded by mu.
	syncMu sync.Mutex
	synced uint64 // records with seq < synced are durable
	syncs  uint64 // fdatasync calls, for the benchmark
}

// OpenFile opens the audit log at path with default options and fsync as given.
func OpenFile(path string, fsync bool) (*FileWriter, error) {
	return Open(path, Options{Fsync: fsync})
}

// Open opens (creating with mode 0600) the audit log at path for appending.
//
// An existing log is verified first (its own file: the chain inside it, its
// header and its head file; rotated predecessors are not re-read). When it
// is intact the chain continues from its last record; when it is not, it is
// never appended to: it is renamed like a rotated file and a new file is
// begun whose header links to the last record that verified and states the
// break, so the evidence stays and `sandboxctl audit verify` keeps
// reporting it. Then a start record is written, and an interrupted record
// for every exec the log shows accepted but never ended.
//
// Only one writer may have a log open: the head file is locked.
func Open(path string, o Options) (*FileWriter, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.RotateBytes < 0 {
		return nil, fmt.Errorf("audit rotation size %d is negative", o.RotateBytes)
	}
	path = filepath.Clean(path)
	w := &FileWriter{path: path, dir: filepath.Dir(path), base: filepath.Base(path), o: o, open: map[string]*OpenExec{}}

	headBytes, headErr := os.ReadFile(HeadPath(path))
	hf, err := os.OpenFile(HeadPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log %q: head file: %w", path, err)
	}
	if err := unix.Flock(int(hf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		hf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("open audit log %q: another process is writing it (it holds the lock on %s)", path, HeadPath(path))
		}
		return nil, fmt.Errorf("open audit log %q: lock %s: %w", path, HeadPath(path), err)
	}
	w.hf = hf
	fail := func(err error) (*FileWriter, error) {
		if w.f != nil {
			w.f.Close()
		}
		if w.fwd != nil {
			w.fwd.Close()
		}
		hf.Close()
		return nil, err
	}
	if o.Syslog != "" {
		if w.fwd, err = DialSyslog(o.Syslog, o.Log); err != nil {
			return fail(err)
		}
	}

	st, err := os.Stat(path)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Errorf("open audit log %q: %w", path, err))
	case err == nil && !st.Mode().IsRegular():
		return fail(fmt.Errorf("open audit log %q: not a regular file", path))
	case err == nil && st.Size() > 0:
		err = w.openExisting(st.Size())
	default:
		err = w.openEmpty(headBytes, headErr == nil)
	}
	if err != nil {
		return fail(err)
	}
	if err := w.begin(); err != nil {
		return fail(err)
	}
	return w, nil
}

// openExisting continues an intact log or sets a broken one aside.
func (w *FileWriter) openExisting(size int64) error {
	rep, err := Verify(os.DirFS(w.dir), w.base, VerifyOptions{Partial: true, fileOnly: true})
	if err != nil {
		return fmt.Errorf("open audit log %q: %w", w.path, err)
	}
	if rep.Break != nil {
		w.opened.Break = rep.Break
		w.o.Log.Error("the audit log does not verify; it is set aside unchanged and a new file linked to its last good record is begun",
			"log", w.path, "break", rep.Break.Error())
		return w.setAside(rep)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open audit log %q: %w", w.path, err)
	}
	w.setFile(f)
	w.size = size
	w.seq, w.prev, w.logID, w.fileIndex = rep.LastSeq+1, rep.Head, rep.LogID, rep.fileIndex
	if n := len(rep.Files); n > 0 {
		w.fileRecords = rep.Files[n-1].Records
	}
	w.takeOpen(rep.Open)
	w.opened.State = "continued"
	w.opened.PreviousShutdown = "unclean"
	if rep.CleanStop {
		w.opened.PreviousShutdown = "clean"
	}
	return nil
}

// setAside renames a broken log out of the way, like a rotated file, and
// begins a new file linked to its last record that verified.
func (w *FileWriter) setAside(rep *Report) error {
	name, k, err := w.nextRotatedName()
	if err != nil {
		return err
	}
	if err := os.Rename(w.path, filepath.Join(w.dir, name)); err != nil {
		return fmt.Errorf("set the broken audit log aside: %w", err)
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	w.opened.State, w.opened.SetAside = "set-aside", name
	w.logID = rep.LogID
	if w.logID == "" {
		w.logID = newLogID()
	}
	w.seq, w.prev = 0, ZeroHash
	extra := map[string]any{"break": rep.Break, "verified_records": rep.Records}
	if rep.Records > 0 {
		w.seq, w.prev = rep.LastSeq+1, rep.Head
	}
	w.fileIndex = k + 1
	w.takeOpen(rep.Open)
	msg := fmt.Sprintf("the previous log file %s failed verification at start-up and was set aside unchanged: %s", name, rep.Break.Error())
	return w.newFile(reasonBroken, name, msg, extra)
}

// openEmpty begins a log where there is none (or an empty file): a new
// chain, or -- when a head file says a chain existed -- the end of an
// interrupted rotation, or a file that says the log went missing.
func (w *FileWriter) openEmpty(headBytes []byte, headExisted bool) error {
	h, herr := parseHead(headBytes)
	if !headExisted || herr != nil {
		w.logID, w.fileIndex, w.seq, w.prev = newLogID(), 1, 0, ZeroHash
		w.opened.State = "new"
		return w.newFile(reasonNew, "", "", nil)
	}
	w.logID, w.seq, w.prev = h.LogID, h.Seq+1, h.Hash
	if name, k, rep := w.rotatedTail(h); name != "" {
		// The previous supervisor renamed the log and died before it made
		// the new file.
		w.fileIndex = k + 1
		w.takeOpen(rep.Open)
		w.opened.State, w.opened.PreviousShutdown = "rotation-finished", "unclean"
		return w.newFile(reasonSize, name, "", map[string]any{"finished_after_restart": true})
	}
	w.fileIndex = h.FileIndex + 1
	w.opened.State = "missing"
	msg := fmt.Sprintf("the audit log %s was missing or empty at start-up, but its head file says the chain had reached seq %d (hash %s)", w.base, h.Seq, h.Hash)
	w.o.Log.Error(msg)
	return w.newFile(reasonMissing, "", msg, map[string]any{"head": h})
}

// rotatedTail finds the newest rotated file and returns it when it ends
// with the rotate record the head file names.
func (w *FileWriter) rotatedTail(h head) (string, int, *Report) {
	names, err := w.rotatedNames()
	if err != nil || len(names) == 0 {
		return "", 0, nil
	}
	last := names[len(names)-1]
	rep, err := Verify(os.DirFS(w.dir), last.name, VerifyOptions{Partial: true, fileOnly: true})
	if err != nil || rep.Break != nil || rep.Tail != "rotate record" || rep.LastSeq != h.Seq || rep.Head != h.Hash {
		return "", 0, nil
	}
	return last.name, last.n, rep
}

type rotatedName struct {
	name string
	n    int
}

// rotatedNames lists <base>.<N> in the log's directory, by N.
func (w *FileWriter) rotatedNames() ([]rotatedName, error) {
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", w.dir, err)
	}
	var out []rotatedName
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), w.base+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n <= 0 || strconv.Itoa(n) != rest {
			continue
		}
		out = append(out, rotatedName{e.Name(), n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, nil
}

// nextRotatedName is <base>.<N+1> for the largest existing N.
func (w *FileWriter) nextRotatedName() (string, int, error) {
	names, err := w.rotatedNames()
	if err != nil {
		return "", 0, err
	}
	k := 1
	if len(names) > 0 {
		k = names[len(names)-1].n + 1
	}
	return w.base + "." + strconv.Itoa(k), k, nil
}

func (w *FileWriter) setFile(f *os.File) {
	w.f, w.fd = f, int(f.Fd())
	w.gen++
}

// newFile creates the log file and writes its header.
func (w *FileWriter) newFile(reason, prevFile, problem string, extra map[string]any) error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create audit log %q: %w", w.path, err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		f.Close()
		return fmt.Errorf("create audit log %q: it is not empty (another writer?)", w.path)
	}
	w.setFile(f)
	w.size, w.fileRecords = 0, 0
	facts := map[string]any{
		"log_id": w.logID, "file_index": w.fileIndex, "hash_alg": "sha256", "schema": SchemaVersion,
		"reason": reason, "prev_file": prevFile,
		"created_by": selfFacts(w.o.Version),
	}
	if w.seq > 0 {
		facts["prev_last_seq"] = w.seq - 1
	}
	if open := openList(w.open); len(open) > 0 {
		facts["open_execs"] = open
	}
	for k, v := range extra {
		facts[k] = v
	}
	hdr := w.selfRecord(StepHeader, facts)
	hdr.OK, hdr.Error = problem == "", problem
	if _, err := w.appendLocked(hdr, false, false); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync audit log: %w", err)
	}
	return syncDir(w.dir)
}

// begin writes the start record and closes the execs a dead supervisor left.
func (w *FileWriter) begin() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	facts := selfFacts(w.o.Version)
	facts["fsync"] = w.o.Fsync
	facts["rotate_bytes"] = w.o.RotateBytes
	facts["retention_files"] = w.o.RetentionFiles
	facts["syslog"] = w.o.Syslog
	facts["log_state"] = w.opened.State
	if w.opened.PreviousShutdown != "" {
		facts["previous_shutdown"] = w.opened.PreviousShutdown
	}
	if s := w.o.StartFacts; s != nil {
		facts["socket"], facts["state_dir"], facts["helper"] = s.Socket, s.StateDir, s.Helper
		facts["helper_config"], facts["audit_env_values"] = s.HelperConfig, s.AuditEnvValues
	}
	start := w.selfRecord(StepStart, facts)
	if _, err := w.appendLocked(start, true, false); err != nil {
		return err
	}
	startSeq := w.seq - 1
	for _, o := range openList(w.open) {
		r := Record{
			ExecID: o.ExecID, Step: StepInterrupted, Source: SourceSupervisor,
			CallerUID: o.CallerUID, CallerGID: o.CallerGID, CallerPID: o.CallerPID,
			Error: interruptedReason(o),
			Facts: &stepfacts.Interrupted{LastStep: o.LastStep, LastSeq: o.LastSeq, AcceptedAt: o.Since, FoundAtStartSeq: startSeq,
				Kernel: o.Launch},
		}
		if _, err := w.appendLocked(r, true, false); err != nil {
			return err
		}
		w.opened.Interrupted = append(w.opened.Interrupted, o.ExecID)
	}
	if len(w.opened.Interrupted) > 0 {
		w.o.Log.Warn("execs interrupted by the previous supervisor's end are closed in the audit log", "execs", w.opened.Interrupted)
	}
	if err := w.pruneLocked(); err != nil {
		return err
	}
	w.synced = w.seq
	return nil
}

// interruptedReason is the error of an interrupted record.
func interruptedReason(o OpenExec) string {
	if o.Launch {
		return "supervisor restarted: the supervisor stopped (killed or crashed) while this kernel ran, so it has no reap record; " +
			"the helper and bubblewrap die with the supervisor (parent-death signal), taking the kernel's sandbox with them; " +
			"the session's workspace is kept and its next exec starts a new kernel"
	}
	return "the supervisor stopped (killed or crashed) before this exec was reaped, so it has no reap record; " +
		"the helper and bubblewrap die with the supervisor (parent-death signal), taking the sandbox with them, " +
		"and the next supervisor removes the one-shot workspace at start-up"
}

func (w *FileWriter) selfRecord(step string, facts map[string]any) Record {
	return Record{Step: step, Source: SourceSupervisor, CallerUID: os.Getuid(), CallerGID: os.Getgid(), CallerPID: os.Getpid(), OK: true, Facts: facts}
}

func selfFacts(version string) map[string]any {
	return map[string]any{"pid": os.Getpid(), "uid": os.Getuid(), "gid": os.Getgid(), "version": version}
}

func (w *FileWriter) takeOpen(list []OpenExec) {
	for _, o := range list {
		o := o
		w.open[o.ExecID] = &o
	}
}

// Opened says what Open found and did.
func (w *FileWriter) Opened() OpenInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.opened
}

// Write appends one record, chained to the one before. It stamps the schema
// version, seq, prev_hash and hash and, when unset, the time. With Fsync it
// returns once the record is durable; records written concurrently share
// one fdatasync (group commit).
func (w *FileWriter) Write(r Record) error {
	if IsLogRecord(r.Step) || r.Step == StepInterrupted {
		// Only the writer itself writes these: a header in the middle of a
		// file would read as tampering, a stray interrupted as an exec lost.
		return fmt.Errorf("write audit record %s/%s: %q records are written by the audit writer only", r.ExecID, r.Step, r.Step)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("write audit record %s/%s: the audit log is closed", r.ExecID, r.Step)
	}
	seq, err := w.appendLocked(r, true, w.o.Fsync)
	if err == nil {
		w.count++
	}
	w.mu.Unlock()
	if err != nil || !w.o.Fsync || (Deferred(r) && !w.o.SyncEveryRecord) {
		return err
	}
	if err := w.syncTo(seq + 1); err != nil {
		return fmt.Errorf("write audit record %s/%s: %w", r.ExecID, r.Step, err)
	}
	return nil
}

// Sync is the barrier: it returns once every record written before it is
// durable (one fdatasync, shared with concurrent callers). Without Fsync
// it does nothing. The launcher calls it before it releases the helper:
// nothing runs before its accept, decide and prepare records are durable.
func (w *FileWriter) Sync() error {
	if !w.o.Fsync {
		return nil
	}
	w.mu.Lock()
	n, closed := w.seq, w.closed
	w.mu.Unlock()
	if closed {
		return errors.New("sync audit log: the audit log is closed")
	}
	return w.syncTo(n)
}

// syncTo returns once every record with seq < n is durable: one fdatasync
// covers every record appended before it started, so concurrent writers
// share it.
func (w *FileWriter) syncTo(n uint64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if w.synced >= n {
		w.mu.Unlock()
		return nil
	}
	f, gen, target, hash, stuck := w.f, w.gen, w.seq, w.prev, w.err
	w.mu.Unlock()
	if stuck != nil {
		return fmt.Errorf("the audit log is unusable since an earlier failure: %w", stuck)
	}
	var serr error
	w.mu.Lock()
	w.syncs++
	w.mu.Unlock()
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { serr = unix.Fdatasync(int(fd)) })
	}
	if err == nil {
		err = serr
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A failure is no failure when the file was synced and closed under us
	// (rotation or Close, a new gen) without a sync error: what we were to
	// sync is durable then.
	if err != nil && (w.gen == gen || serr != nil) {
		w.err = err
		return fmt.Errorf("sync audit log: %w", err)
	}
	if target > w.synced {
		w.synced = target
	}
	if w.err == nil {
		if err := w.writeHeadLocked(target-1, hash); err != nil {
			return err
		}
	}
	return nil
}

// writeHeadLocked points the head file at record seq, never backwards. The
// head file is not synced: it names a record only after that record was
// made durable (or, without fsync, written), and the verifier accepts a log
// that is ahead of its head.
func (w *FileWriter) writeHeadLocked(seq uint64, hash string) error {
	if w.headSet && seq <= w.headSeq {
		return nil
	}
	if _, err := w.hf.WriteAt(encodeHead(head{LogID: w.logID, File: w.base, FileIndex: w.fileIndex, Seq: seq, Hash: hash}), 0); err != nil {
		w.err = err
		return fmt.Errorf("update audit head file: %w", err)
	}
	w.headSeq, w.headSet = seq, true
	return nil
}

// appendLocked writes r as the next record of the chain and returns its
// seq. w.mu is held (or the writer is not shared yet). Unless deferSync,
// the record is synced (with Fsync) and named in the head file before it
// returns; with deferSync the caller calls syncTo.
func (w *FileWriter) appendLocked(r Record, mayRotate, deferSync bool) (uint64, error) {
	if w.err != nil {
		return 0, fmt.Errorf("write audit record %s/%s: the audit log is unusable since an earlier failure: %w", r.ExecID, r.Step, w.err)
	}
	r.V = SchemaVersion
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	r.Seq, r.PrevHash = w.seq, w.prev
	line, hash, err := encodeRecord(r)
	if err != nil {
		return 0, fmt.Errorf("encode audit record %s/%s: %w", r.ExecID, r.Step, err)
	}
	if mayRotate && w.o.RotateBytes > 0 && w.fileRecords >= 2 && w.size+int64(len(line)) > w.o.RotateBytes {
		if err := w.rotateLocked(); err != nil {
			w.err = err
			return 0, fmt.Errorf("rotate the audit log: %w", err)
		}
		r.Seq, r.PrevHash = w.seq, w.prev
		if line, hash, err = encodeRecord(r); err != nil {
			return 0, fmt.Errorf("encode audit record %s/%s: %w", r.ExecID, r.Step, err)
		}
	}
	if _, err := w.f.Write(line); err != nil {
		w.err = err
		return 0, fmt.Errorf("write audit record %s/%s: %w", r.ExecID, r.Step, err)
	}
	w.seq++
	w.prev = hash
	w.size += int64(len(line))
	w.fileRecords++
	if !deferSync {
		if w.o.Fsync {
			if err := w.syncLocked(); err != nil {
				return 0, err
			}
			w.synced = w.seq
		}
		if err := w.writeHeadLocked(r.Seq, hash); err != nil {
			return 0, err
		}
	}
	r.Hash = hash
	w.track(r)
	if w.fwd != nil {
		w.fwd.Forward(r, line[:len(line)-1])
	}
	return r.Seq, nil
}

func (w *FileWriter) syncLocked() error {
	w.syncs++
	if err := unix.Fdatasync(w.fd); err != nil {
		w.err = err
		return fmt.Errorf("sync audit log: %w", err)
	}
	return nil
}

// rotateLocked ends the current file with a rotate record, renames it to
// <base>.<N> and begins a new file whose header links to it.
func (w *FileWriter) rotateLocked() error {
	name, k, err := w.nextRotatedName()
	if err != nil {
		return err
	}
	facts := map[string]any{"reason": reasonSize, "bytes": w.size, "rotate_bytes": w.o.RotateBytes, "renamed_to": name, "next_file": w.base}
	if _, err := w.appendLocked(w.selfRecord(StepRotate, facts), false, false); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync audit log: %w", err)
	}
	w.gen++ // synced: a group sync that finds it closed may rely on that
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	if err := os.Rename(w.path, filepath.Join(w.dir, name)); err != nil {
		return fmt.Errorf("rename %s to %s: %w", w.path, name, err)
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	w.fileIndex = k + 1
	if err := w.newFile(reasonSize, name, "", nil); err != nil {
		return err
	}
	return w.pruneLocked()
}

// pruneLocked deletes the oldest rotated files beyond RetentionFiles
// (DESIGN.md I11: audit volume is bounded). The prune record naming them
// is synced first: a crash between the two leaves files the record says
// are gone, which verify accepts, never a gap the chain does not explain.
// A file that cannot be removed is logged and left; it is not an audit
// failure.
func (w *FileWriter) pruneLocked() error {
	keep := w.o.RetentionFiles
	if keep <= 0 {
		return nil
	}
	names, err := w.rotatedNames()
	if err != nil || len(names) <= keep {
		return err
	}
	victims := names[:len(names)-keep]
	deleted := make([]string, len(victims))
	for i, v := range victims {
		deleted[i] = v.name
	}
	facts := map[string]any{"deleted": deleted, "retention_files": keep, "oldest_kept": names[len(names)-keep].name}
	if _, err := w.appendLocked(w.selfRecord(StepPrune, facts), false, false); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync audit log before pruning: %w", err)
	}
	for _, name := range deleted {
		if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.o.Log.Warn("audit retention: cannot delete a rotated file", "file", name, "err", err)
		}
	}
	w.o.Log.Info("audit retention: deleted rotated files", "files", deleted, "kept", keep)
	return syncDir(w.dir)
}

// track follows which accepted execs have not ended yet.
func (w *FileWriter) track(r Record) {
	if r.ExecID == "" || IsLogRecord(r.Step) {
		return
	}
	o, ok := w.open[r.ExecID]
	if !ok {
		if !OpensTrail(r) || Terminal(r) {
			return
		}
		o = &OpenExec{ExecID: r.ExecID, CallerUID: r.CallerUID, CallerGID: r.CallerGID, CallerPID: r.CallerPID, Since: r.Time,
			Launch: r.Step != StepAccept}
		w.open[r.ExecID] = o
	}
	o.LastStep, o.LastSeq = r.Step, r.Seq
	if Terminal(r) {
		delete(w.open, r.ExecID)
	}
}

// Count returns how many records Write has written for this writer's callers
// (the writer's own header, start, rotate and stop records not included).
func (w *FileWriter) Count() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// Close writes a stop record, syncs and closes the log. A later Write fails.
func (w *FileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.err == nil {
		stop := w.selfRecord(StepStop, map[string]any{"reason": "shutdown", "records_written": w.count, "open_execs": len(w.open)})
		if _, err := w.appendLocked(stop, true, false); err != nil {
			errs = append(errs, err)
		}
		if err := w.f.Sync(); err != nil {
			errs = append(errs, err)
		} else {
			w.gen++
		}
	}
	errs = append(errs, w.f.Close())
	if w.fwd != nil {
		errs = append(errs, w.fwd.Close())
	}
	errs = append(errs, w.hf.Close())
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func newLogID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RefusalLimiter bounds the audit volume of refused requests (DESIGN.md
// I11): a peer that may open the socket but is refused (403, 429) could
// otherwise make the supervisor write, and fsync, one record per request,
// as fast as it can send them, until the disk is full and every caller gets
// 503. It passes at most one refusal record per key (a caller identity, or
// for a request refused before it has one, its remote address) per
// interval to the sink; the ones it holds back are counted, and the count
// is written as facts.refusals_suppressed on the key's next record, or by
// Flush in an aggregate record once the interval is over. So every refusal
// is accounted for in the chain, and a key costs at most two records per
// interval. The keys tracked at once are bounded (RefusalKeys): a new key
// while the table is full shares the overflow key's window (fail closed:
// a flood of fresh addresses limits itself, it cannot evict a window). It
// is safe for concurrent use.
type RefusalLimiter struct {
	sink     Sink
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	keys     map[string]*refusalWindow
}

// RefusalKeys bounds the keys a RefusalLimiter tracks, the overflow key
// included; Flush forgets idle keys every interval.
const RefusalKeys = 4096

// RefusalOverflowKey is the key of refusals whose own key did not fit.
const RefusalOverflowKey = "(overflow)"

type refusalWindow struct {
	start      time.Time
	suppressed int
	last       Record // the last held-back record: its caller, for the aggregate
}

// NewRefusalLimiter returns a limiter writing to sink; now may be nil.
func NewRefusalLimiter(sink Sink, interval time.Duration, now func() time.Time) *RefusalLimiter {
	if now == nil {
		now = time.Now
	}
	return &RefusalLimiter{sink: sink, interval: interval, now: now, keys: map[string]*refusalWindow{}}
}

// Write writes r unless a refusal of key was written less than the
// interval ago; then it only counts r. written says which.
func (l *RefusalLimiter) Write(key string, r Record) (written bool, err error) {
	now := l.now()
	l.mu.Lock()
	w, ok := l.keys[key]
	if !ok && len(l.keys) >= RefusalKeys-1 {
		key = RefusalOverflowKey
		w = l.keys[key]
	}
	if w != nil && now.Sub(w.start) < l.interval {
		w.suppressed++
		w.last = r
		l.mu.Unlock()
		return false, nil
	}
	held := 0
	if w != nil {
		held = w.suppressed
	}
	l.keys[key] = &refusalWindow{start: now}
	l.mu.Unlock()
	if held > 0 {
		r.Facts = withFact(r.FactMap(), "refusals_suppressed", held)
	}
	if err := l.sink.Write(r); err != nil {
		return false, fmt.Errorf("refusal record for %s: %w", key, err)
	}
	return true, nil
}

// Flush writes one aggregate record for every key whose interval is over
// with refusals held back, and forgets idle keys. newID makes the
// aggregate's exec id. Call it about once an interval, and at shutdown with
// all set.
func (l *RefusalLimiter) Flush(all bool, newID func() string) error {
	now := l.now()
	l.mu.Lock()
	var out []Record
	for key, w := range l.keys {
		if !all && now.Sub(w.start) < l.interval {
			continue
		}
		if w.suppressed > 0 {
			r := w.last
			r.ExecID, r.Time, r.OK = newID(), time.Time{}, false
			r.Error = fmt.Sprintf("%d refused requests of this caller, not recorded one by one (at most one refusal record per caller per %s)", w.suppressed, l.interval)
			if key == RefusalOverflowKey {
				r.Error = fmt.Sprintf("%d refused requests of callers beyond the refusal limiter's %d keys, not recorded one by one (the last one's caller is shown)", w.suppressed, RefusalKeys)
			}
			agg := map[string]any{"aggregate": true, "since": w.start.UTC()}
			// The facts every record of the step carries (method and
			// path of an accept), from the last refusal it stands for.
			last := w.last.FactMap()
			for _, k := range []string{"method", "path"} {
				if v, ok := last[k]; ok {
					agg[k] = v
				}
			}
			r.Facts = withFact(agg, "refusals_suppressed", w.suppressed)
			out = append(out, r)
		}
		delete(l.keys, key)
	}
	l.mu.Unlock()
	var errs []error
	for _, r := range out {
		if err := l.sink.Write(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func withFact(facts map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(facts)+1)
	for fk, fv := range facts {
		out[fk] = fv
	}
	out[k] = v
	return out
}
