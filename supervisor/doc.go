// Package supervisor is sandboxd's API front and its exec orchestration:
// the HTTP API on the Unix socket (authorisation by SO_PEERCRED) and on TCP
// listeners (authentication by bearer API key, optionally TLS), per-caller
// connection and body limits, strict decoding, the error contract of
// API.md, metrics, live admin settings, and the path of an exec from its
// request to its answer, with the supervisor's audit records of the accept
// and decide steps of every launch.
//
// A request's path reads top-down in exec.go: serveExec → acceptExec →
// decideAndAdmit → launchAndAnswer → dispatch, which hands the decided exec
// to one of the launchers: the session's kernel (sessionkernels.go, then
// package kernel), the runner's run-once mode (runner.go, package kernel),
// a warm sandbox (warmpool.go, launch.WarmPool) or a cold launch (the
// Launcher, package launch); then answer (stream.go for a streamed one).
// Sessions are package session's; the handlers of their routes are here
// (session_handlers.go), as are the egress glue (egress.go: each exec's or
// kernel's proxy socket and its audit records) and environments.
//
// It runs as an ordinary user and must never hold or ask for a capability,
// never run a payload itself or outside the helper's sandbox, never hand a
// request's environment to anything but the payload, never act on a request
// it could not audit, and never answer a payload failure with an API error.
// Bad input from one caller must never crash the process or touch another
// caller's work; a warm sandbox must never serve a second exec or one
// whose decision differs from what it was built for; a TCP request must
// never be served without a key unless the operator allowed that on
// loopback, and an API key must never be logged or audited.
package supervisor
