package audit

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Syslog forwards audit records to a syslog daemon as RFC 5424 messages,
// one Unix datagram each (/dev/log, or any datagram socket the operator
// names). The forwarded copy is a witness outside the supervisor's reach:
// each message carries the record's seq and hash in structured data and the
// whole record line as its message, so a receiver can recheck the chain.
//
// Forwarding never holds up a launch: records are queued and sent by one
// goroutine; when the queue is full or the socket refuses a message, the
// message is dropped and counted, and the receiver sees the gap in seq.
// The file written by FileWriter stays the trail of record.
type Syslog struct {
	path     string
	hostname string
	pid      int
	log      *slog.Logger

	ch      chan []byte
	done    chan struct{}
	conn    *net.UnixConn // owned by the sending goroutine
	once    sync.Once
	sent    atomic.Uint64
	dropped atomic.Uint64
	lastLog atomic.Int64 // unix nanos of the last drop warning
}

// Syslog message constants. The facility is authpriv (10), where security
// and authorisation messages go; the severity is info for a record that is
// ok and warning for one that is not. SDID is the structured-data id; 32473
// is the private enterprise number RFC 5612 reserves for documentation and
// examples, used here until the project registers its own.
const (
	syslogFacility = 10
	sevWarning     = 4
	sevInfo        = 6
	syslogAppName  = "sandboxd"
	SyslogSDID     = "sandboxd@32473"
	syslogQueue    = 4096
	syslogTimeout  = time.Second
)

// DialSyslog connects to the Unix datagram socket at path. The socket must
// exist and accept datagrams now; later failures are retried per message.
func DialSyslog(path string, log *slog.Logger) (*Syslog, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("audit syslog forwarding to %s: %w (is a syslog daemon listening there?)", path, err)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "-"
	}
	s := &Syslog{path: path, hostname: sanitizeHeaderField(host, 255), pid: os.Getpid(), log: log,
		ch: make(chan []byte, syslogQueue), done: make(chan struct{}), conn: conn}
	go s.run()
	return s, nil
}

// Forward queues r (whose line, without newline, is line) for sending.
func (s *Syslog) Forward(r Record, line []byte) {
	msg := FormatRFC5424(r, line, s.hostname, s.pid)
	select {
	case s.ch <- msg:
	default:
		s.drop("the forwarding queue is full")
	}
}

func (s *Syslog) drop(why string) {
	n := s.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := s.lastLog.Load(); now-last > int64(10*time.Second) && s.lastLog.CompareAndSwap(last, now) {
		s.log.Warn("audit records not forwarded to syslog", "socket", s.path, "why", why, "dropped_total", n)
	}
}

func (s *Syslog) run() {
	defer close(s.done)
	for msg := range s.ch {
		if err := s.send(msg); err != nil {
			s.drop(err.Error())
			continue
		}
		s.sent.Add(1)
	}
	if s.conn != nil {
		s.conn.Close()
	}
}

// send writes one datagram, reconnecting once (the daemon may have been
// restarted, which replaces its socket).
func (s *Syslog) send(msg []byte) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if s.conn == nil {
			s.conn, err = net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.path, Net: "unixgram"})
			if err != nil {
				s.conn = nil
				continue
			}
		}
		_ = s.conn.SetWriteDeadline(time.Now().Add(syslogTimeout))
		if _, err = s.conn.Write(msg); err == nil {
			return nil
		}
		s.conn.Close()
		s.conn = nil
	}
	return err
}

// Stats returns how many messages were sent and dropped so far.
func (s *Syslog) Stats() (sent, dropped uint64) { return s.sent.Load(), s.dropped.Load() }

// Close sends what is queued (for at most a few seconds) and disconnects.
func (s *Syslog) Close() error {
	s.once.Do(func() { close(s.ch) })
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
	}
	return nil
}

// FormatRFC5424 renders one record as an RFC 5424 syslog message:
//
//	<PRI>1 TIMESTAMP HOSTNAME sandboxd PROCID STEP [sandboxd@32473 seq="" exec_id="" ok="" hash=""] BOM LINE
//
// TIMESTAMP is the record's time in UTC with microseconds, MSGID its step,
// and the message the record's JSON line exactly as in the file (UTF-8,
// so preceded by a byte order mark as RFC 5424 section 6.4 asks).
func FormatRFC5424(r Record, line []byte, hostname string, pid int) []byte {
	sev := sevInfo
	if !r.OK {
		sev = sevWarning
	}
	var b bytes.Buffer
	b.Grow(len(line) + 256)
	b.WriteByte('<')
	b.WriteString(strconv.Itoa(syslogFacility*8 + sev))
	b.WriteString(">1 ")
	b.WriteString(r.Time.UTC().Format("2006-01-02T15:04:05.000000Z"))
	b.WriteByte(' ')
	b.WriteString(orDash(sanitizeHeaderField(hostname, 255)))
	b.WriteByte(' ')
	b.WriteString(syslogAppName)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(pid))
	b.WriteByte(' ')
	b.WriteString(orDash(sanitizeHeaderField(r.Step, 32)))
	b.WriteString(" [")
	b.WriteString(SyslogSDID)
	param := func(name, value string) {
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteString(`="`)
		for i := 0; i < len(value); i++ {
			if c := value[i]; c == '"' || c == '\\' || c == ']' {
				b.WriteByte('\\')
			}
			b.WriteByte(value[i])
		}
		b.WriteByte('"')
	}
	param("seq", strconv.FormatUint(r.Seq, 10))
	if r.ExecID != "" {
		param("exec_id", r.ExecID)
	}
	param("ok", strconv.FormatBool(r.OK))
	param("hash", r.Hash)
	b.WriteString("] \xEF\xBB\xBF")
	b.Write(line)
	return b.Bytes()
}

// sanitizeHeaderField keeps a header field within RFC 5424's PRINTUSASCII
// (33..126) and its length limit.
func sanitizeHeaderField(s string, max int) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(out) < max; i++ {
		if c := s[i]; c >= 33 && c <= 126 {
			out = append(out, c)
		} else {
			out = append(out, '_')
		}
	}
	return string(out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
