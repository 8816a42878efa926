package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rfc5424 matches one message as FormatRFC5424 writes it, field by field
// after RFC 5424 section 6: PRI VERSION TIMESTAMP HOSTNAME APP-NAME PROCID
// MSGID, one SD-ELEMENT, then a UTF-8 MSG starting with a BOM.
var rfc5424 = regexp.MustCompile(`^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) ([!-~]{1,255}) ([!-~]{1,48}) ([!-~]{1,128}) ([!-~]{1,32}) \[(sandboxd@32473)((?: [^= \]"]{1,32}="(?:[^"\\\]]|\\["\\\]])*")*)\] \x{FEFF}(.*)$`)

var sdParam = regexp.MustCompile(` ([^= \]"]{1,32})="((?:[^"\\\]]|\\["\\\]])*)"`)

type syslogMsg struct {
	pri                                int
	ts, host, app, procid, msgid, sdid string
	params                             map[string]string
	msg                                []byte
}

func parseSyslog(t *testing.T, b []byte) syslogMsg {
	t.Helper()
	m := rfc5424.FindSubmatch(b)
	if m == nil {
		t.Fatalf("not an RFC 5424 message as specified: %q", b)
	}
	pri, _ := strconv.Atoi(string(m[1]))
	out := syslogMsg{pri: pri, ts: string(m[2]), host: string(m[3]), app: string(m[4]), procid: string(m[5]),
		msgid: string(m[6]), sdid: string(m[7]), params: map[string]string{}, msg: m[9]}
	for _, p := range sdParam.FindAllSubmatch(m[8], -1) {
		v := strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\]`, `]`).Replace(string(p[2]))
		out.params[string(p[1])] = v
	}
	return out
}

func listen(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// receive reads datagrams, as a syslog daemon does, until one whose MSGID
// is until arrives; wait returns them.
func receive(t *testing.T, ln *net.UnixConn, until string) (wait func() []syslogMsg) {
	t.Helper()
	type result struct {
		msgs []syslogMsg
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		var out [][]byte
		buf := make([]byte, 1<<20)
		for {
			_ = ln.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := ln.Read(buf)
			if err != nil {
				ch <- result{err: fmt.Errorf("after %d messages: %w", len(out), err)}
				return
			}
			out = append(out, append([]byte(nil), buf[:n]...))
			if m := rfc5424.FindSubmatch(buf[:n]); m != nil && string(m[6]) == until {
				var msgs []syslogMsg
				for _, b := range out {
					msgs = append(msgs, parseSyslog(t, b))
				}
				ch <- result{msgs: msgs}
				return
			}
		}
	}()
	return func() []syslogMsg {
		t.Helper()
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.msgs
	}
}

// TestSyslogForwarding sends a real log to a real listening datagram socket
// and checks every message against RFC 5424 and against the file.
func TestSyslogForwarding(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	ln := listen(t, sock)
	path := filepath.Join(dir, "audit.log")
	wait := receive(t, ln, StepStop)
	w, err := Open(path, Options{Syslog: sock, Version: "9.9"})
	if err != nil {
		t.Fatal(err)
	}
	launch(t, w, `id"with]odd\chars`, "ok")
	launch(t, w, "refused", "refused")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	msgs := wait()
	raw, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	if len(msgs) != len(lines) {
		t.Fatalf("%d messages for %d records", len(msgs), len(lines))
	}
	host, _ := os.Hostname()
	for i, m := range msgs {
		var r Record
		if err := json.Unmarshal(m.msg, &r); err != nil {
			t.Fatalf("message %d does not carry the record: %v", i, err)
		}
		// The message is the record's line exactly as in the file, so the
		// receiver holds a copy of the chain it can verify.
		if !bytes.Equal(m.msg, lines[i]) {
			t.Fatalf("message %d differs from line %d:\n%s\n%s", i, i+1, m.msg, lines[i])
		}
		wantPri := 10*8 + 6
		if !r.OK {
			wantPri = 10*8 + 4
		}
		if m.pri != wantPri || m.app != "sandboxd" || m.procid != strconv.Itoa(os.Getpid()) || m.msgid != r.Step || m.sdid != SyslogSDID {
			t.Errorf("message %d header: %+v", i, m)
		}
		if host != "" && m.host != host {
			t.Errorf("hostname %q, want %q", m.host, host)
		}
		ts, err := time.Parse(time.RFC3339Nano, m.ts)
		if err != nil || !ts.Equal(r.Time.Truncate(time.Microsecond)) {
			t.Errorf("timestamp %q for record time %v (%v)", m.ts, r.Time, err)
		}
		if m.params["seq"] != strconv.FormatUint(r.Seq, 10) || m.params["hash"] != r.Hash || m.params["ok"] != strconv.FormatBool(r.OK) || m.params["exec_id"] != r.ExecID {
			t.Errorf("message %d structured data %v for record seq %d exec %q", i, m.params, r.Seq, r.ExecID)
		}
	}
}

// TestSyslogReconnects: a syslog daemon that restarts (a new socket at the
// same path) gets the records written after it is back.
func TestSyslogReconnects(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	ln := listen(t, sock)
	wait := receive(t, ln, StepDecide)
	w, err := Open(filepath.Join(dir, "audit.log"), Options{Syslog: sock})
	if err != nil {
		t.Fatal(err)
	}
	launch(t, w, "before", "refused")
	wait()
	ln.Close()
	_ = os.Remove(sock)
	ln = listen(t, sock)
	wait = receive(t, ln, StepDecide)
	launch(t, w, "after", "refused")
	got := wait()
	if got[len(got)-1].params["exec_id"] != "after" {
		t.Fatalf("after the restart: %+v", got)
	}
	w.Close()
	if sent, _ := w.fwd.Stats(); sent < 6 {
		t.Fatalf("sent %d", sent)
	}
}

func TestSyslogNotListening(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "audit.log"), Options{Syslog: filepath.Join(dir, "nobody.sock")})
	if err == nil || !strings.Contains(err.Error(), "syslog") {
		t.Fatalf("Open with no syslog listening: %v", err)
	}
	// The failed open released the log: a second try without syslog works.
	w, err := Open(filepath.Join(dir, "audit.log"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// TestSyslogNeverBlocks: a receiver that never reads costs records on the
// wire (counted), never a stalled launch.
func TestSyslogNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	listen(t, sock) // never read
	w, err := Open(filepath.Join(dir, "audit.log"), Options{Syslog: sock})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	big := strings.Repeat("x", 1<<10)
	for i := 0; i < syslogQueue+500; i++ {
		if err := w.Write(Record{ExecID: "e", Step: StepExec, Facts: map[string]any{"big": big}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("writes took %v with a stuck receiver", d)
	}
	w.Close()
	if _, dropped := w.fwd.Stats(); dropped == 0 {
		t.Fatal("nothing dropped although the receiver never read")
	}
}

func TestFormatRFC5424Escapes(t *testing.T) {
	r := Record{Seq: 7, Time: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC), ExecID: `a"b\c]d`, Step: "accept", OK: true, Hash: "h"}
	got := string(FormatRFC5424(r, []byte(`{"x":1}`), "host name", 42))
	want := "<86>1 2025-01-02T03:04:05.123456Z host_name sandboxd 42 accept [sandboxd@32473 seq=\"7\" exec_id=\"a\\\"b\\\\c\\]d\" ok=\"true\" hash=\"h\"] \xEF\xBB\xBF{\"x\":1}"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
