package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// Kernel is the proxy of a session's kernel: one listener for the kernel's
// whole life (its sandbox is built once, with one relay and one socket),
// whose connections are each attributed, when accepted, to the exec that
// runs in the kernel at that moment, or to the kernel itself between execs
// (a background thread's). An exec's connections count against that exec's
// limits and end with it, exactly as for a process exec's own listener; the
// kernel's own connections count against one more budget of the same size
// for the kernel's life, so a thread left running cannot use more than one
// exec may.
type Kernel struct {
	own *Exec

	mu        sync.Mutex
	cur       *Exec // the running exec's account; nil between execs
	curCtx    context.Context
	curCancel context.CancelFunc
}

// NewKernel returns the proxy state of a kernel whose launch id is
// kernelID; report (if non-nil) receives the records of connections made
// outside any exec, which belong to the kernel's launch id.
func (p *Proxy) NewKernel(kernelID string, report func(Record)) *Kernel {
	return &Kernel{own: p.NewExec(kernelID, report)}
}

// Own is the kernel's own account: the connections made between execs.
func (k *Kernel) Own() *Exec { return k.own }

// BeginExec attributes the connections accepted from now on to a new
// account under execID, with the per-exec limits, until end is called.
// end cuts that exec's connections still open (the exec's lifetime is one
// of its limits) and returns once all of them are recorded, so the
// account's Records are then complete. ctx is the exec's: its end cuts
// them too. Execs of a kernel run one at a time; a BeginExec before the
// previous end ends the previous exec's attribution.
func (k *Kernel) BeginExec(ctx context.Context, execID string, report func(Record)) (*Exec, func()) {
	e := k.own.p.NewExec(execID, report)
	ectx, cancel := context.WithCancel(ctx)
	k.mu.Lock()
	if k.curCancel != nil {
		k.curCancel()
	}
	k.cur, k.curCtx, k.curCancel = e, ectx, cancel
	k.mu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			k.mu.Lock()
			if k.cur == e {
				k.cur, k.curCtx, k.curCancel = nil, nil, nil
			}
			k.mu.Unlock()
			cancel()
			e.wg.Wait()
		})
	}
	return e, end
}

// Serve accepts connections on l until ctx ends (the kernel ended), then
// closes l and every open connection, the running exec's included, and
// returns once the kernel's own are recorded.
func (k *Kernel) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var err error
	for {
		c, aerr := l.Accept()
		if aerr != nil {
			if ctx.Err() == nil && !errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("egress kernel %s: accept: %w", k.own.id, aerr)
			}
			break
		}
		// Under k.mu, so that an exec's end, which clears k.cur under
		// the same lock before it waits, sees every connection taken
		// for it.
		k.mu.Lock()
		e, ectx := k.cur, k.curCtx
		if e == nil {
			e, ectx = k.own, ctx
		}
		e.take(ectx, c)
		k.mu.Unlock()
	}
	cancel()
	l.Close()
	k.mu.Lock()
	if k.curCancel != nil {
		k.curCancel()
	}
	k.mu.Unlock()
	k.own.wg.Wait()
	return err
}
