package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// refusal is a decision not to connect, with the reason the 403 and the
// record carry.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

func refuse(format string, a ...any) error { return &refusal{why: fmt.Sprintf(format, a...)} }

// handle serves one connection from the relay: one request, one upstream.
func (e *Exec) handle(ctx context.Context, c net.Conn) {
	rec := Record{Start: time.Now()}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	c.SetReadDeadline(time.Now().Add(headTimeout))
	lr := &io.LimitedReader{R: c, N: maxHead}
	br := bufio.NewReaderSize(lr, 4096)
	req, err := readRequest(br)
	if err != nil {
		rec.Reason = err.Error()
		e.finish(rec)
		return
	}
	rec.Method = req.Method
	t, err := ParseTarget(req)
	rec.Host, rec.Port = t.Host, t.Port
	var v verdict
	if err == nil {
		v, err = e.check(ctx, t)
		rec.Reason = v.reason
	}
	if v.via.IsValid() {
		rec.AllowNet = v.via.String()
	}
	addr := v.addr
	if addr.IsValid() {
		rec.Address = addr.String()
	}
	if err != nil {
		rec.Reason = err.Error()
		writeRefusal(c, req.Method, t, rec.Reason)
		e.finish(rec)
		return
	}
	rec.Allowed = true
	lr.N = 1<<62 - 1 // the head is read; the byte budget bounds the rest
	up := upstream{addr: netip.AddrPortFrom(addr, uint16(t.Port))}
	if t.Connect {
		e.tunnel(ctx, c, br, t, up, &rec)
	} else {
		e.forward(ctx, c, br, req, t, up, &rec)
	}
	e.finish(rec)
}

// verdict is what check decided: the address to dial (or the one it
// refused), and what allowed it — the rule, and the opted-in range when the
// address is not public.
type verdict struct {
	addr   netip.Addr
	reason string
	via    netip.Prefix
}

// check decides whether t may be reached: the allowlist first (no lookup
// for a name that is not allowed), then one resolution whose every answer
// must be admitted (judge). The address to dial is exactly the one it
// checked.
func (e *Exec) check(ctx context.Context, t Target) (verdict, error) {
	rule, ok := e.p.cfg.Allow.Match(t.Host, t.Port)
	if !ok {
		return verdict{}, refuse("%s:%d is not on the operator's egress allowlist", t.Host, t.Port)
	}
	addrs, err := e.resolve(ctx, t.Host)
	if err != nil {
		return verdict{}, refuse("%s does not resolve: %v", t.Host, err)
	}
	if len(addrs) == 0 {
		return verdict{}, refuse("%s has no address", t.Host)
	}
	// Read per connection: an address the host gained since start is
	// refused at once. Unreadable, nothing is reached (fail closed).
	local, err := e.p.cfg.LocalAddrs()
	if err != nil {
		return verdict{}, refuse("cannot tell the host's own addresses apart: %v", err)
	}
	out := verdict{addr: addrs[0].Unmap(), reason: "allowed by " + rule.String()}
	for i, a := range addrs {
		adm := e.judge(a, local)
		if adm.why != "" {
			// Any refused answer refuses the name: a resolver that mixes
			// public and private answers is an attack, not a fallback.
			return verdict{addr: a}, refuse("%s resolves to %s, a %s: not reachable through egress", t.Host, a, adm.why)
		}
		if i == 0 {
			out.via = adm.via
		}
	}
	if out.via.IsValid() {
		out.reason += " into " + out.via.String() + " (--egress-allow-net)"
	}
	return out, nil
}

// resolve looks host up once. With the TESTONLY resolver map, successive
// lookups of a name take successive answers.
func (e *Exec) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if t := e.p.cfg.TestOnly; t != nil {
		answers, ok := t.Resolve[host]
		if !ok {
			return nil, fmt.Errorf("no such host (TESTONLY resolver)")
		}
		e.mu.Lock()
		i := e.resolves[host]
		e.resolves[host]++
		e.mu.Unlock()
		if i >= len(answers) {
			i = len(answers) - 1
		}
		return answers[i], nil
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return e.p.cfg.Resolver.LookupNetIP(ctx, "ip", host)
}

// upstream is the checked address; dial never takes a name.
type upstream struct{ addr netip.AddrPort }

func (e *Exec) dial(ctx context.Context, up upstream) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return e.p.cfg.Dialer.DialContext(ctx, "tcp", up.addr.String())
}

// writeRefusal answers 403 with a body a model can read.
func writeRefusal(c net.Conn, method string, t Target, why string) {
	what := "request"
	if method != "" {
		what = method
		if t.Host != "" {
			what += " " + t.Host + ":" + strconv.Itoa(t.Port)
		}
	}
	body := "sandboxd egress proxy refused " + what + ": " + why + "\n"
	c.SetWriteDeadline(time.Now().Add(headTimeout))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\nX-Sandboxd-Egress: refused\r\n\r\n%s", len(body), body)
}

// tunnel answers a CONNECT: 200, then the ClientHello is read and its SNI
// checked against the CONNECT host before anything reaches upstream.
func (e *Exec) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, t Target, up upstream, rec *Record) {
	c.SetWriteDeadline(time.Now().Add(headTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Reason = "relay went away: " + err.Error()
		return
	}
	c.SetWriteDeadline(time.Time{})
	hello, err := readClientHello(br)
	if err == nil {
		err = checkSNI(hello, t.Host)
	}
	if err != nil {
		rec.Allowed, rec.Reason = false, err.Error()
		return
	}
	c.SetReadDeadline(time.Time{})
	u, err := e.dial(ctx, up)
	if err != nil {
		rec.Reason = fmt.Sprintf("connect %s: %v", up.addr, err)
		return
	}
	defer u.Close()
	stop := context.AfterFunc(ctx, func() { u.Close() })
	defer stop()
	if !e.spend(len(hello)) {
		rec.Reason += "; closed: the exec's egress byte limit was reached"
		return
	}
	if _, err := u.Write(hello); err != nil {
		rec.Reason += "; upstream write: " + err.Error()
		return
	}
	rec.BytesOut += int64(len(hello))
	e.splice(c, br, u, u, rec)
}

// readClientHello reads exactly one TLS record from br.
func readClientHello(br *bufio.Reader) ([]byte, error) {
	hdr, err := br.Peek(recordHeaderLen)
	if err != nil {
		return nil, fmt.Errorf("no TLS ClientHello after CONNECT: %w", err)
	}
	n, err := RecordLen(hdr)
	if errors.Is(err, errNotTLS) {
		return nil, refuse("CONNECT carries only TLS; the first bytes are not a TLS handshake")
	}
	if err != nil {
		return nil, refuse("malformed TLS record: %v", err)
	}
	rec := make([]byte, n)
	if _, err := io.ReadFull(br, rec); err != nil {
		return nil, refuse("truncated TLS ClientHello: %v", err)
	}
	return rec, nil
}

// checkSNI refuses a ClientHello whose server name is missing or differs
// from the CONNECT host: otherwise an allowed CONNECT host could carry a
// TLS session to another name served by the same address (domain fronting
// through a shared CDN front). The name must be a valid ASCII host name and
// is compared after ASCII lower-casing only: Unicode case folding would
// let "\u212aey.example" (KELVIN SIGN) pass for key.example. A hello whose
// real name is encrypted (ECH, ESNI) is refused: its outer name proves
// nothing.
func checkSNI(rec []byte, host string) error {
	sni, err := ParseSNI(rec)
	if errors.Is(err, ErrEncryptedHello) {
		return refuse("TLS %v; the proxy allows only names it can check (turn ECH off in the client)", err)
	}
	if err != nil {
		return refuse("TLS ClientHello: %v", err)
	}
	if sni == "" {
		return refuse("TLS ClientHello has no server name (SNI); it must name %s", host)
	}
	name, err := NormalizeHost(sni)
	if err != nil || name != host {
		return refuse("TLS server name %q does not match the CONNECT host %s", trunc(sni), host)
	}
	return nil
}

// forward sends one plain-HTTP request upstream (origin form, Connection:
// close) and relays the response until upstream closes.
func (e *Exec) forward(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request, t Target, up upstream, rec *Record) {
	c.SetReadDeadline(time.Time{})
	u, err := e.dial(ctx, up)
	if err != nil {
		rec.Reason = fmt.Sprintf("connect %s: %v", up.addr, err)
		writeBadGateway(c, rec.Reason)
		return
	}
	defer u.Close()
	stop := context.AfterFunc(ctx, func() { u.Close() })
	defer stop()
	out := &budgetWriter{e: e, w: u, n: &rec.BytesOut}
	if err := forwardable(req, t).Write(out); err != nil {
		rec.Reason += "; request: " + err.Error()
		return
	}
	e.copy(c, u, &rec.BytesIn, rec)
}

func writeBadGateway(c net.Conn, why string) {
	body := "sandboxd egress proxy: " + why + "\n"
	fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// splice relays both directions until either side closes.
func (e *Exec) splice(c net.Conn, br *bufio.Reader, u net.Conn, uw io.Writer, rec *Record) {
	var wg sync.WaitGroup
	var outRec Record
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.copy(uw, br, &outRec.BytesOut, &outRec)
		if cw, ok := u.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	e.copy(c, u, &rec.BytesIn, rec)
	c.Close()
	u.Close()
	wg.Wait() // orders outRec's writes before these reads
	rec.BytesOut += outRec.BytesOut
	rec.Reason += outRec.Reason
}

// copy moves bytes from src to dst against the exec's byte budget.
func (e *Exec) copy(dst io.Writer, src io.Reader, n *int64, rec *Record) {
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if !e.spend(k) {
				rec.Reason += "; closed: the exec's egress byte limit was reached"
				return
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
			*n += int64(k)
		}
		if err != nil {
			return
		}
	}
}

// budgetWriter counts and budgets the request bytes sent upstream.
type budgetWriter struct {
	e *Exec
	w io.Writer
	n *int64
}

func (b *budgetWriter) Write(p []byte) (int, error) {
	if !b.e.spend(len(p)) {
		return 0, fmt.Errorf("the exec's egress byte limit was reached")
	}
	k, err := b.w.Write(p)
	*b.n += int64(k)
	return k, err
}
