package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Resolver is what the proxy resolves names with (*net.Resolver fits).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer is what the proxy connects with (*net.Dialer fits). It is only
// ever given an address literal, never a name.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Limits bound one exec's use of the proxy. Together with the exec's own
// timeout (the context Serve runs under) they are the per-exec limits.
type Limits struct {
	// MaxConns is the number of connection attempts (allowed or refused)
	// served; later ones are closed unread and counted in Dropped.
	MaxConns int
	// MaxBytes bounds the bytes relayed, both directions, over all of the
	// exec's connections.
	MaxBytes int64
}

// DefaultLimits are used for a zero Limits field.
var DefaultLimits = Limits{MaxConns: 64, MaxBytes: 256 << 20}

// Timeouts of one connection. headTimeout bounds how long a relay may
// take to send a request head or a ClientHello (slowloris); dialTimeout
// bounds one connect.
const (
	headTimeout = 10 * time.Second
	dialTimeout = 10 * time.Second
	// maxHead bounds a request line and headers (I12).
	maxHead = 16 << 10
)

// Config is the proxy's operator configuration.
type Config struct {
	Allow    Allowlist
	Resolver Resolver // default net.DefaultResolver
	Dialer   Dialer   // default a net.Dialer with dialTimeout
	Limits   Limits
	// AllowNets are the operator's opted-in ranges (--egress-allow-net,
	// ParseAllowNets): a special-purpose address in one of them may be
	// reached through a name on the allowlist (an internal package
	// mirror). Never loopback, link-local, multicast, unspecified or one
	// of the host's own addresses (New refuses such a range).
	AllowNets []netip.Prefix
	// LocalAddrs reads the host's own addresses, which are refused on
	// every connection whatever the ranges say; default LocalAddrs (the
	// interfaces, read afresh per connection).
	LocalAddrs func() ([]netip.Addr, error)
	// TestOnly, when non-nil, is honoured only in test binaries.
	TestOnly *TestOnly
}

// Proxy holds the configuration shared by every exec's listener.
type Proxy struct {
	cfg Config
}

// New checks cfg and returns a Proxy. A TestOnly switch in a binary that
// may not honour it is an error, never silently ignored.
func New(cfg Config) (*Proxy, error) {
	if cfg.TestOnly != nil && !testOnlyAllowed() {
		return nil, fmt.Errorf("%w: egress TESTONLY switches in a production binary", errdefs.ErrInvalid)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &net.Dialer{Timeout: dialTimeout}
	}
	if cfg.Limits.MaxConns <= 0 {
		cfg.Limits.MaxConns = DefaultLimits.MaxConns
	}
	if cfg.Limits.MaxBytes <= 0 {
		cfg.Limits.MaxBytes = DefaultLimits.MaxBytes
	}
	if cfg.LocalAddrs == nil {
		cfg.LocalAddrs = LocalAddrs
	}
	if err := checkAllowNets(cfg); err != nil {
		return nil, err
	}
	return &Proxy{cfg: cfg}, nil
}

// checkAllowNets re-checks cfg.AllowNets as ParseAllowNets does and
// against the host's addresses now: a range that could admit the host
// itself is refused at start, not discovered later.
func checkAllowNets(cfg Config) error {
	if len(cfg.AllowNets) == 0 {
		return nil
	}
	for _, p := range cfg.AllowNets {
		if _, err := ParseAllowNets([]string{p.String()}); err != nil {
			return err
		}
	}
	local, err := cfg.LocalAddrs()
	if err != nil {
		return fmt.Errorf("egress allow-net: %w", err)
	}
	return checkAllowNetsLocal(cfg.AllowNets, local)
}

// Allowlist returns the operator's allowlist.
func (p *Proxy) Allowlist() Allowlist { return p.cfg.Allow }

// Record is one connection attempt, allowed or refused.
type Record struct {
	Method   string        // CONNECT, or the plain-HTTP method
	Host     string        // as requested (normalised when valid)
	Port     int           // as requested; 0 when unparseable
	Address  string        // the resolved address dialled or refused; "" if none
	Allowed  bool          // the proxy connected (or would have, had the dial worked)
	AllowNet string        // the --egress-allow-net range that admitted Address; "" for a public one
	Reason   string        // why it was refused or closed, or the rule that allowed it
	BytesOut int64         // sandbox → destination
	BytesIn  int64         // destination → sandbox
	Start    time.Time     // when the connection was accepted
	Duration time.Duration // until both sides were closed
}

// Exec serves one exec's listener and keeps its records.
type Exec struct {
	p      *Proxy
	id     string
	report func(Record)

	mu       sync.Mutex
	records  []Record
	attempts int
	dropped  int
	budget   int64 // bytes left, both directions
	resolves map[string]int

	wg sync.WaitGroup // the connections being served
}

// NewExec returns the proxy state of one exec. report, if non-nil, is
// called once per finished Record (from the connection's goroutine), for
// the audit trail.
func (p *Proxy) NewExec(execID string, report func(Record)) *Exec {
	return &Exec{p: p, id: execID, report: report, budget: p.cfg.Limits.MaxBytes, resolves: map[string]int{}}
}

// ID is the exec id the records belong to.
func (e *Exec) ID() string { return e.id }

// Records returns the finished records so far, in order of completion.
func (e *Exec) Records() []Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Record(nil), e.records...)
}

// Dropped is the number of connections closed unread over MaxConns.
func (e *Exec) Dropped() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}

// Serve accepts connections on l until ctx ends (the exec finished or
// timed out), then closes l and every open connection and returns once
// all are recorded.
func (e *Exec) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer e.wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("egress %s: accept: %w", e.id, err)
		}
		e.take(ctx, c)
	}
}

// take serves c as one of e's connections until ctx ends, or closes it
// unread when e is over MaxConns.
func (e *Exec) take(ctx context.Context, c net.Conn) {
	if !e.admit() {
		c.Close()
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.handle(ctx, c)
	}()
}

// admit counts an attempt against MaxConns.
func (e *Exec) admit() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.attempts >= e.p.cfg.Limits.MaxConns {
		e.dropped++
		return false
	}
	e.attempts++
	return true
}

// spend takes n bytes from the exec's budget; false once it is exhausted.
func (e *Exec) spend(n int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.budget -= int64(n)
	return e.budget >= 0
}

func (e *Exec) finish(r Record) {
	r.Duration = time.Since(r.Start)
	e.mu.Lock()
	e.records = append(e.records, r)
	e.mu.Unlock()
	if e.report != nil {
		e.report(r)
	}
}
