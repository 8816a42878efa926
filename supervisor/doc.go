// Package supervisor owns everything of sandboxd that talks to the outside
// world: the HTTP API on the Unix socket (authorisation by SO_PEERCRED) and
// on TCP listeners (authentication by bearer API key, optionally TLS),
// strict decoding, the error contract of API.md, exec orchestration up to the
// Launcher, the warm pool of one-shot sandboxes (warmpool.go), metrics, and
// the supervisor's audit records for the accept and decide steps of every
// launch.
//
// It runs as an ordinary user and must never hold or ask for a capability,
// never run a payload itself or outside the helper's sandbox, never hand a
// request's environment to anything but the payload, never act on a request
// it could not audit, and never answer a payload failure with an API error.
// Bad input from one caller must never crash the process or touch another
// caller's work; a warm sandbox must never serve a second exec or one
// whose decision differs from what it was built for; a TCP request must never be served without a key unless
// the operator allowed that on loopback, and an API key must never be
// logged or audited.
package supervisor
