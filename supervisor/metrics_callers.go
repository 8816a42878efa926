package supervisor

import (
	"fmt"
	"io"
)

// Caller-share refusals: requests refused because their
// caller held its own share of a limit, while others could still be
// served. The label is the limit, a closed set, never the caller: a
// caller's identity in a label would let callers grow the metric without
// bound (and would publish API key names to whoever scrapes /metrics).
// Which caller was refused is in the audit log (the refusal records).
const (
	shareConnections = "connections" // --max-connections-per-caller
	shareBodies      = "bodies"      // --caller-body-budget
	shareExecQueue   = "exec_queue"  // --max-queued-execs-per-caller
	shareSessions    = "sessions"    // --max-sessions-per-caller
)

// writeCallerRefusals writes sandboxd_caller_share_refusals_total.
func (s *Server) writeCallerRefusals(w io.Writer) {
	n := map[string]uint64{}
	s.limits.mu.Lock()
	n[shareConnections] = s.limits.connRefused[connRefusedCaller]
	n[shareBodies] = s.limits.bodyRefused
	s.limits.mu.Unlock()
	s.metrics.mu.Lock()
	n[shareExecQueue] = s.metrics.queueShareRefused
	s.metrics.mu.Unlock()
	if s.sessions != nil {
		n[shareSessions] = s.sessions.ShareRefused()
	}
	fmt.Fprintf(w, "# HELP sandboxd_caller_share_refusals_total Requests refused because their caller held its own share of a limit, by limit.\n")
	fmt.Fprintf(w, "# TYPE sandboxd_caller_share_refusals_total counter\n")
	for _, l := range []string{shareBodies, shareConnections, shareExecQueue, shareSessions} {
		fmt.Fprintf(w, "sandboxd_caller_share_refusals_total{limit=%q} %d\n", l, n[l])
	}
}
