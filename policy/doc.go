// Package policy owns the operator's configuration of sandboxd and the
// "decide" step of the launch sequence: which runtime a language maps to,
// how a requested timeout is clamped to the operator's caps, which
// environment names a request may pass to its payload, which workspace paths
// and artifact patterns are acceptable, and the limits an exec is held to.
//
// Decide is the decide step as one function: a decoded exec request (a
// type of package api), the caller and the Config in, a Decision or a
// refusal (an errdefs class) out. The supervisor only carries the Decision
// out. New rules (kernels, environments, egress, per-caller settings) go
// there, each with its row in the table test.
//
// Everything here is a pure function of its inputs (the Config and the
// request values): it does no I/O, starts nothing and keeps no state, so the
// supervisor can call it from any goroutine and tests can cover it with
// tables. It must never import the supervisor.
//
// It must never silently raise or lower a value a caller asked for: a request
// outside the operator's bounds is an error the caller sees (400), not a
// quietly different run. And it must never be the only line of defence:
// sandboxd-nsinit re-validates what it receives against its own root-owned
// config.
package policy
