// Package kernel is the host side of the kernel channel. It starts a runner
// (package kernel/runners) as the payload of a long-lived sandbox
// (launch.Sandbox), drives the channel with protocol.Conn, whose sequence
// rules (ready first; then frames only while an exec runs, carrying its id;
// its result last) are the only ones, and turns an exec's frames and end
// into its result: a session's kernel (session.go), or a process-mode
// code-node call through the runner's run-once mode (once.go).
//
// The channel is untrusted input (invariant I12): the first violation
// breaks the kernel, which is then killed; output caps, display limits and
// timeouts are the supervisor's, as for a process exec. The host depends on
// launch, protocol and workspace, and reaches egress and the audit log only
// through the hooks its owner gives it (Host), handing the audit hook typed
// facts (audit/facts); an exec's attestation and usage come from its
// kernel's sandbox (launch.Attest, Sandbox.MeterExec). It must never trust a byte
// of the channel, never read a frame outside an exec as that exec's, never
// reuse a kernel after an exec that overran or broke the channel, and never
// run caller code outside a sandbox.
package kernel
