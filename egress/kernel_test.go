package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kernelFixture is a kernel's proxy on a Unix socket with servers on
// 127.0.0.2 standing in for the internet.
type kernelFixture struct {
	k      *Kernel
	sock   string
	plain  int
	cancel context.CancelFunc
	done   chan error
	f      *fixture // only for client()
}

func newKernelFixture(t *testing.T, lim Limits) *kernelFixture {
	t.Helper()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", r.Host) })
	plain := listenOn(t, hello, false)
	allow, err := ParseAllowlist(fmt.Sprintf("pypi.test:%d", port(t, plain)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Allow: allow, Limits: lim, TestOnly: &TestOnly{Resolve: defaultResolve(), PublicLoopback: pub}})
	if err != nil {
		t.Fatal(err)
	}
	kf := &kernelFixture{k: p.NewKernel("k-1", nil), sock: filepath.Join(t.TempDir(), "proxy.sock"), plain: port(t, plain), done: make(chan error, 1)}
	l, err := net.Listen("unix", kf.sock)
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, kf.cancel = context.WithCancel(context.Background())
	go func() { kf.done <- kf.k.Serve(ctx, l) }()
	t.Cleanup(func() {
		kf.cancel()
		select {
		case err := <-kf.done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the kernel's Serve did not return after the kernel ended")
		}
	})
	kf.f = &fixture{sock: kf.sock}
	return kf
}

func (kf *kernelFixture) get(t *testing.T, host string) (int, string) {
	t.Helper()
	return get(t, kf.f.client(host), fmt.Sprintf("http://%s:%d/", host, kf.plain))
}

// TestKernelRecordsPerExec: one listener for the kernel's life; each
// connection belongs to the exec running when it was accepted, or to the
// kernel between execs; an exec's records are complete when its end
// returns.
func TestKernelRecordsPerExec(t *testing.T) {
	kf := newKernelFixture(t, Limits{})
	ctx := context.Background()

	e1, end1 := kf.k.BeginExec(ctx, "x1", nil)
	if st, body := kf.get(t, "pypi.test"); st != 200 || !strings.Contains(body, "hello") {
		t.Fatalf("exec 1: %d %q", st, body)
	}
	if st, _ := kf.get(t, "off.test"); st != 403 {
		t.Fatalf("exec 1 off-list: %d", st)
	}
	end1()
	if r := e1.Records(); len(r) != 2 || !r[0].Allowed && !r[1].Allowed {
		t.Fatalf("exec 1 records: %+v", r)
	}

	// Between execs: the kernel's own account.
	if st, _ := kf.get(t, "pypi.test"); st != 200 {
		t.Fatalf("between execs: %d", st)
	}
	waitRecords(t, kf.k.Own(), 1)

	e2, end2 := kf.k.BeginExec(ctx, "x2", nil)
	if st, _ := kf.get(t, "pypi.test"); st != 200 {
		t.Fatalf("exec 2: %d", st)
	}
	end2()
	if r := e2.Records(); len(r) != 1 || !r[0].Allowed || r[0].BytesIn == 0 {
		t.Fatalf("exec 2 records: %+v", r)
	}
	if r := e1.Records(); len(r) != 2 {
		t.Errorf("exec 1 gained records after its end: %+v", r)
	}
	if r := kf.k.Own().Records(); len(r) != 1 {
		t.Errorf("kernel records: %+v", r)
	}
}

// TestKernelExecLimits: an exec's connection limit is its own (the next
// exec starts afresh), and an exec's end cuts its open connections.
func TestKernelExecLimits(t *testing.T) {
	kf := newKernelFixture(t, Limits{MaxConns: 2})
	ctx := context.Background()
	e1, end1 := kf.k.BeginExec(ctx, "x1", nil)
	kf.get(t, "pypi.test")
	kf.get(t, "pypi.test")
	if st, _ := kf.get(t, "pypi.test"); st != 0 {
		t.Errorf("third connection of exec 1 served: %d", st)
	}
	end1()
	if e1.Dropped() != 1 {
		t.Errorf("exec 1 dropped %d, want 1", e1.Dropped())
	}

	e2, end2 := kf.k.BeginExec(ctx, "x2", nil)
	if st, _ := kf.get(t, "pypi.test"); st != 200 {
		t.Errorf("exec 2 was charged for exec 1's connections: %d", st)
	}
	// A connection left open (a head that never ends) is cut by the end.
	c, err := net.Dial("unix", kf.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://pypi.test/ HTTP/1.1\r\n")
	time.Sleep(50 * time.Millisecond)
	ended := make(chan struct{})
	go func() { end2(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the exec's end did not cut its open connection")
	}
	if r := e2.Records(); len(r) != 2 || !r[0].Allowed || r[1].Allowed || e2.Dropped() != 0 {
		t.Errorf("exec 2: records %+v dropped %d", r, e2.Dropped())
	}
}

// TestKernelEndCutsEverything: the kernel's end closes the listener and
// the running exec's connections.
func TestKernelEndCutsEverything(t *testing.T) {
	kf := newKernelFixture(t, Limits{})
	e, end := kf.k.BeginExec(context.Background(), "x1", nil)
	c, err := net.Dial("unix", kf.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://pypi.test/ HTTP/1.1\r\n")
	time.Sleep(50 * time.Millisecond)
	kf.cancel()
	if err := <-kf.done; err != nil {
		t.Fatal(err)
	}
	kf.done <- nil // for the cleanup
	ended := make(chan struct{})
	go func() { end(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the exec's connection outlived the kernel")
	}
	if r := e.Records(); len(r) != 1 || r[0].Allowed {
		t.Errorf("records: %+v", r)
	}
	if _, err := net.Dial("unix", kf.sock); err == nil {
		t.Error("the kernel's socket still accepts after the kernel ended")
	}
}
