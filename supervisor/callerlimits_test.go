package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/session"
)

// rawRequest opens a connection and sends a request head (and no body,
// whatever its Content-Length says), as a slow or hostile client would.
func rawRequest(t *testing.T, sock, method, path string, contentLength int) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if method != "" {
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: sandboxd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, contentLength)
	}
	return c
}

// readAnswer reads an HTTP answer from c within d; an error when none came,
// which is what a server that waits for the body does.
func readAnswer(c net.Conn, d time.Duration) (*http.Response, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// TestConnectionShare: one uid holds at most its share of the connections;
// the next is answered 429 with Retry-After and closed at accept, counted
// in /metrics, and the connections it already holds keep working.
func TestConnectionShare(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnections, cfg.MaxConnectionsPerCaller = 8, 3
	ts := startServer(t, cfg, nil, readyChecks())
	var held []net.Conn
	for i := 0; i < 3; i++ {
		held = append(held, rawRequest(t, ts.sock, "", "", 0))
	}
	settle(func() bool { return ts.srv.limits.open() == 3 })
	c := rawRequest(t, ts.sock, "", "", 0)
	resp, err := readAnswer(c, 2*time.Second)
	if err != nil {
		t.Fatalf("the connection past the share was not answered: %v", err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("past the share: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the refused connection is still open")
	}
	// A held connection still serves; closing one frees a place.
	fmt.Fprintf(held[0], "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	_ = held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(held[0])
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a held connection: %v %v", resp, err)
	}
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	if !strings.Contains(body.String(), `sandboxd_connections_refused_total{reason="caller"} 1`) {
		t.Fatalf("metrics do not count the refusal:\n%s", body.String())
	}
	settle(func() bool { return ts.srv.limits.open() == 2 })
	if r := ts.do("GET", "/v1/health", ""); r.status != 200 {
		t.Fatalf("after a connection closed: %d", r.status)
	}
}

// TestConnectionGlobalCap: the global maximum holds whatever the uids.
func TestConnectionGlobalCap(t *testing.T) {
	l := newCallerLimits(2, 10, 1<<20, discardLog())
	sock := t.TempDir() + "/s"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		l.connState(s, http.StateNew)
		conns = append(conns, c)
	}
	if l.open() != 2 || l.connRefused[connRefusedGlobal] != 1 {
		t.Fatalf("open %d, refused %v; want 2 open and 1 refused (global)", l.open(), l.connRefused)
	}
	if resp, err := readAnswer(conns[2], time.Second); err != nil || resp.StatusCode != 429 {
		t.Fatalf("the third connection: %v %v", resp, err)
	}
}

// TestBodyBudgetRefusesBeforeReading: while a caller has its body budget
// in flight (a slow body), its next request is answered 429 before a byte
// of its body is read: the request head alone gets the answer.
func TestBodyBudgetRefusesBeforeReading(t *testing.T) {
	cfg := testConfig() // 64 KiB bodies
	cfg.CallerBodyBudget = cfg.MaxBodyBytes
	ts := startServer(t, cfg, nil, readyChecks())

	slow := rawRequest(t, ts.sock, "POST", "/v1/exec", int(cfg.MaxBodyBytes)-10)
	fmt.Fprint(slow, `{"language":"python","code":"`) // and then nothing
	settle(func() bool { return ts.srv.limits.inFlight(0) > 0 })

	for _, path := range []string{"/v1/exec", "/v1/sessions"} {
		c := rawRequest(t, ts.sock, "POST", path, 1000)
		resp, err := readAnswer(c, 3*time.Second)
		if err != nil {
			t.Fatalf("%s: no answer without the body: %v (the server waits for a body it should not read)", path, err)
		}
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d, want 429 with Retry-After", path, resp.StatusCode)
		}
	}
	// The slow body ends: the budget is free again.
	slow.Close()
	waitFor(t, func() bool { return ts.srv.limits.inFlight(0) == 0 })
	if r := ts.do("POST", "/v1/exec", `{"language":"python","code":"print(1)"}`); r.status != 200 {
		t.Fatalf("after the slow body ended: %d %s", r.status, r.body)
	}
}

// TestExecShareRefusedBeforeBody: a caller whose queue share is full is
// told so from the request head, before its body is read or decoded.
func TestExecShareRefusedBeforeBody(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConcurrentExecs, cfg.MaxQueuedExecs, cfg.MaxQueuedExecsPerCaller = 2, 4, 1
	release := make(chan struct{})
	fl := &fakeLauncher{fn: func(ctx context.Context, req launch.Request) (*launch.ExecResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return okResult(req), nil
	}}
	ts := startServer(t, cfg, fl, readyChecks())
	defer close(release)
	for i := 0; i < 2; i++ { // one runs (max-1 for one uid), one waits
		// Not ts.doCtx: it may call t.Fatal, which must not run off the
		// test's goroutine. The Stats wait below checks what matters.
		go func() {
			req, err := http.NewRequestWithContext(context.Background(), "POST", "http://sandboxd/v1/exec", strings.NewReader(`{"language":"python","code":"1"}`))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if resp, err := ts.client.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	waitFor(t, func() bool { s := ts.srv.gate.Stats(); return s.Running == 1 && s.Queued == 1 })
	c := rawRequest(t, ts.sock, "POST", "/v1/exec", 5000)
	resp, err := readAnswer(c, 3*time.Second)
	if err != nil {
		t.Fatalf("no answer from the request head: %v", err)
	}
	if resp.StatusCode != 429 || resp.Header.Get(api.ExecIDHeader) == "" {
		t.Fatalf("%d (exec id %q), want 429 with an exec id", resp.StatusCode, resp.Header.Get(api.ExecIDHeader))
	}
	if m := string(ts.do("GET", "/metrics", "").body); !strings.Contains(m, `sandboxd_caller_share_refusals_total{limit="exec_queue"} 1`+"\n") {
		t.Fatalf("the queue-share refusal is not in /metrics:\n%s", m)
	}
}

// TestSessionShareRefusalMetric: a create refused because the caller holds
// its share of the sessions is counted under limit="sessions"; a create
// refused by the global maximum is not.
func TestSessionShareRefusalMetric(t *testing.T) {
	var st *session.Store
	ts := startServer(t, testConfig(), nil, readyChecks(), func(s *Server) {
		var err error
		st, err = session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 2, MaxPerCaller: 1, TTLDefault: 60, TTLCap: 60,
			SelfUID: os.Getuid(), Log: discardLog()})
		if err != nil {
			t.Fatal(err)
		}
		s.SetSessions(st)
	})
	if r := ts.do("POST", "/v1/sessions", "{}"); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v1/sessions", "{}"); r.status != 429 {
		t.Fatalf("second create: %d %s, want 429", r.status, r.body)
	}
	if _, err := st.Create(launch.Caller{UID: 4242}, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(launch.Caller{UID: 4343}, nil, ""); err == nil {
		t.Fatal("a third session past --max-sessions")
	}
	m := string(ts.do("GET", "/metrics", "").body)
	for _, want := range []string{`sandboxd_caller_share_refusals_total{limit="sessions"} 1`, `sandboxd_caller_share_refusals_total{limit="connections"} 0`,
		`sandboxd_caller_share_refusals_total{limit="bodies"} 0`, `sandboxd_caller_share_refusals_total{limit="exec_queue"} 0`} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestRefusalsAuditedAtMostOncePerSecond: a burst of refused requests from
// one caller writes one accept record, not one per request, and the
// aggregate record counts the rest at shutdown.
func TestRefusalsAuditedAtMostOncePerSecond(t *testing.T) {
	cfg := testConfig()
	cfg.CallerBodyBudget = cfg.MaxBodyBytes
	sink := &lockedSink{}
	ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) {
		s.sink, s.refusals = sink, audit.NewRefusalLimiter(sink, refusalInterval, nil)
	})
	slow := rawRequest(t, ts.sock, "POST", "/v1/exec", int(cfg.MaxBodyBytes)-10)
	settle(func() bool { return ts.srv.limits.inFlight(0) > 0 })
	const burst = 50
	for i := 0; i < burst; i++ {
		c := rawRequest(t, ts.sock, "POST", "/v1/exec", 100)
		if resp, err := readAnswer(c, 3*time.Second); err != nil || resp.StatusCode != 429 {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
		c.Close()
	}
	written, _ := sink.earlyRefusals()
	// The burst takes well under the 1 s window on any machine; allow one
	// window boundary.
	if written < 1 || written > 2 {
		t.Fatalf("%d refused requests wrote %d refusal records; want 1 (2 across a window boundary)", burst, written)
	}
	slow.Close()
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if _, total := sink.earlyRefusals(); total != burst {
		t.Fatalf("the chain accounts for %d refusals; want %d", total, burst)
	}
	// Every record, the aggregate included, is as the schema says.
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, r := range sink.recs {
		if _, err := r.DecodeFacts(); err != nil && !errors.Is(err, facts.ErrUntyped) {
			t.Errorf("%s record %+v: %v", r.Step, r.Facts, err)
		}
	}
}

// lockedSink keeps records under a lock, so the test may read them while
// the server runs.
type lockedSink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (s *lockedSink) Write(r audit.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
	return nil
}

// earlyRefusals counts the records of requests refused before their body
// was read, and the refusals they account for (suppressed ones included).
func (s *lockedSink) earlyRefusals() (records, refusals int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		f := r.FactMap()
		agg := f["aggregate"] == true
		if r.Step != audit.StepAccept || r.OK || (f["body_read"] != false && !agg) {
			continue
		}
		if !agg {
			records++
			refusals++
		}
		if n, ok := f["refusals_suppressed"].(int); ok {
			refusals += n
		}
	}
	return records, refusals
}

// TestSessionShare: one caller holds at most its share of the sessions;
// beyond it 429 with Retry-After, and another caller still creates one.
func TestSessionShare(t *testing.T) {
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 4, MaxPerCaller: 2,
		TTLDefault: 60, TTLCap: 60, SelfUID: os.Getuid(), Log: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	hostile, other := launch.Caller{UID: 1001}, launch.Caller{UID: 1002}
	for i := 0; i < 2; i++ {
		if _, err := st.Create(hostile, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.Create(hostile, nil, "")
	if !errors.Is(err, session.ErrTooMany) || !strings.Contains(err.Error(), "its share") {
		t.Fatalf("a third session of one caller: %v", err)
	}
	if e := toAPI(err); e.Status != 429 || e.RetryAfter < 1 || !strings.Contains(e.Message, "its share") {
		t.Fatalf("answered %d Retry-After %d %q; want 429 with Retry-After naming the share", e.Status, e.RetryAfter, e.Message)
	}
	if _, err := st.Create(other, nil, ""); err != nil {
		t.Fatalf("another caller is locked out: %v", err)
	}
}

// settle waits up to a second for cond, the server's view of what the
// test just did; the test's own assertions then decide, so that against a
// server without the limits they fail at the property, not here.
func settle(cond func() bool) {
	deadline := time.Now().Add(time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (l *callerLimits) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func (l *callerLimits) inFlight(uid int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bodies[launch.Caller{UID: uid}.ID()]
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestArchiveBudgetAndRetention: a caller's archives stay within its
// budget (oldest removed first, audited), and archives past the retention
// are removed (audited), another caller's recent ones kept.
func TestArchiveBudgetAndRetention(t *testing.T) {
	now := time.Now()
	sink := &lockedSink{}
	archives := t.TempDir()
	st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 8, TTLDefault: 60, TTLCap: 60,
		QuotaBytes: 1 << 20, ArchiveDir: archives, ArchiveMaxBytes: 1 << 20, ArchiveCallerMaxBytes: 30 << 10,
		ArchiveRetention: 30 * 24 * time.Hour, SelfUID: os.Getuid(), Sink: sink, Log: discardLog(),
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	archiveKey := func(c launch.Caller, key string) {
		t.Helper()
		s, err := st.Create(c, nil, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st.WorkspaceDir(s)+"/data", make([]byte, 10<<10), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(s.ID, c, "delete"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // distinct modification times
	}
	hostile, other := launch.Caller{UID: 1001}, launch.Caller{UID: 1002}
	for _, k := range []string{"a", "b", "c", "d"} {
		archiveKey(hostile, k)
	}
	archiveKey(other, "x")
	count := func(uid int) (n int, bytes int64) {
		ents, _ := os.ReadDir(fmt.Sprintf("%s/u%d", archives, uid))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".tar") {
				continue // the checksum next to each archive
			}
			fi, _ := e.Info()
			n++
			bytes += fi.Size()
		}
		return n, bytes
	}
	if n, b := count(1001); b > 30<<10 || n != 2 {
		t.Fatalf("uid 1001 keeps %d archives, %d bytes; want the 2 newest within 30 KiB", n, b)
	}
	pA := filepath.Join(archives, "u1001", archive.KeyFor("uid:1001", "a").Name+".tar")
	pD := filepath.Join(archives, "u1001", archive.KeyFor("uid:1001", "d").Name+".tar")
	if exists(pA) || !exists(pD) {
		t.Fatalf("oldest-first: a kept %v, d kept %v", exists(pA), exists(pD))
	}
	if n, _ := count(1002); n != 1 {
		t.Fatalf("another caller's archive was touched: %d left", n)
	}
	if got := sink.steps("session.archive_removed"); got != 2 {
		t.Fatalf("%d archive removals audited; want 2", got)
	}

	// 31 days later: everything has expired.
	now = now.Add(31 * 24 * time.Hour)
	if n := st.ExpireArchives(); n != 3 {
		t.Fatalf("expired %d archives; want 3", n)
	}
	if got := sink.steps("archive.expire"); got != 3 {
		t.Fatalf("%d expiries audited; want 3", got)
	}
	requireStrictFacts(t, sink.recs, facts.StepSessionCreate, facts.StepSessionArchive, facts.StepSessionDelete,
		facts.StepSessionArchiveRemoved, facts.StepArchiveExpire)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func (s *lockedSink) steps(step string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.recs {
		if r.Step == step {
			n++
		}
	}
	return n
}
