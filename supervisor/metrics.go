package supervisor

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"

	"github.com/sandboxd/sandboxd/api"
)

// Exec outcomes, the label values of sandboxd_execs_total. The set is fixed
// so that a label never carries caller-controlled text.
const (
	OutcomeOK          = "ok"          // the payload exited 0
	OutcomeError       = "error"       // the payload exited non-zero, or the launch failed with a bug or a disconnect
	OutcomeTimeout     = "timeout"     // the payload ran past its timeout
	OutcomeSignal      = "signal"      // the payload was killed by a signal (OOM included)
	OutcomeRefused     = "refused"     // the request was refused before launch (4xx)
	OutcomeUnavailable = "unavailable" // the host could not sandbox (503)
)

var outcomes = []string{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeSignal, OutcomeRefused, OutcomeUnavailable}

// durationBuckets are upper bounds in seconds, from a trivial script to the
// session cap.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// counter is satisfied by audit.FileWriter: when the sink can count, the
// metric reports every record it wrote (the launcher's included), not only
// the supervisor's own.
type counter interface{ Count() uint64 }

// metrics is written by hand in the Prometheus text format (0.0.4) to keep
// the dependency list short.
type metrics struct {
	mu        sync.Mutex
	execs     map[string]uint64
	refused   map[string]uint64 // by error code, a closed set
	buckets   []uint64          // per durationBuckets, non-cumulative
	durSum    float64
	durCount  uint64
	inFlight  int64
	auditOwn  uint64
	auditSink counter
	sessions  func() int
	// queueShareRefused counts execs refused because their caller held its
	// share of the exec queue (metrics_callers.go).
	queueShareRefused uint64
}

func newMetrics(sink any) *metrics {
	m := &metrics{
		execs:   make(map[string]uint64),
		refused: make(map[string]uint64),
		buckets: make([]uint64, len(durationBuckets)),
	}
	if c, ok := sink.(counter); ok {
		m.auditSink = c
	}
	return m
}

func (m *metrics) exec(outcome string) {
	m.mu.Lock()
	m.execs[outcome]++
	m.mu.Unlock()
}

func (m *metrics) refuse(code api.ErrorCode) {
	m.mu.Lock()
	m.refused[string(code)]++
	m.mu.Unlock()
}

func (m *metrics) duration(seconds float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, ub := range durationBuckets {
		if seconds <= ub {
			m.buckets[i]++
			break
		}
	}
	m.durSum += seconds
	m.durCount++
}

func (m *metrics) addInFlight(d int64) {
	m.mu.Lock()
	m.inFlight += d
	m.mu.Unlock()
}

func (m *metrics) auditWritten() {
	m.mu.Lock()
	m.auditOwn++
	m.mu.Unlock()
}

func (m *metrics) write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b []byte
	p := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }

	p("# HELP sandboxd_execs_total Execs by outcome.\n# TYPE sandboxd_execs_total counter\n")
	for _, o := range outcomes {
		p("sandboxd_execs_total{outcome=%q} %d\n", o, m.execs[o])
	}

	p("# HELP sandboxd_exec_duration_seconds Duration of launched execs, as the launcher measured it.\n")
	p("# TYPE sandboxd_exec_duration_seconds histogram\n")
	var cum uint64
	for i, ub := range durationBuckets {
		cum += m.buckets[i]
		p("sandboxd_exec_duration_seconds_bucket{le=%q} %d\n", formatFloat(ub), cum)
	}
	p("sandboxd_exec_duration_seconds_bucket{le=\"+Inf\"} %d\n", m.durCount)
	p("sandboxd_exec_duration_seconds_sum %s\n", formatFloat(m.durSum))
	p("sandboxd_exec_duration_seconds_count %d\n", m.durCount)

	p("# HELP sandboxd_execs_in_flight Execs running now.\n# TYPE sandboxd_execs_in_flight gauge\n")
	p("sandboxd_execs_in_flight %d\n", m.inFlight)

	sessions := 0
	if m.sessions != nil {
		sessions = m.sessions()
	}
	p("# HELP sandboxd_active_sessions Sessions that exist now.\n# TYPE sandboxd_active_sessions gauge\n")
	p("sandboxd_active_sessions %d\n", sessions)

	p("# HELP sandboxd_launches_refused_total Launches refused before they started, by error code.\n")
	p("# TYPE sandboxd_launches_refused_total counter\n")
	reasons := make([]string, 0, len(m.refused))
	for r := range m.refused {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		p("sandboxd_launches_refused_total{reason=%q} %d\n", r, m.refused[r])
	}

	records := m.auditOwn
	if m.auditSink != nil {
		records = m.auditSink.Count()
	}
	p("# HELP sandboxd_audit_records_total Audit records written.\n# TYPE sandboxd_audit_records_total counter\n")
	p("sandboxd_audit_records_total %d\n", records)

	_, err := w.Write(b)
	return err
}

func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
