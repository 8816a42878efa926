// Package egress is the host side of a sandbox's only way out: an HTTP
// CONNECT and plain-HTTP forward proxy that the supervisor runs, one
// listener per exec (Exec) or per session kernel for the kernel's life
// (Kernel, which attributes each connection to the exec running when it is
// accepted), reached from inside the sandbox over a Unix socket through the
// in-sandbox relay (nsinit/shim/sandboxd-relay.c).
//
// It owns the operator's allowlist, the classification of resolved
// addresses, the TLS SNI check inside a CONNECT, per-exec limits
// (connections, bytes, the exec's lifetime), one Record per connection
// attempt, allowed or refused, and the module that sends Node's built-in
// fetch to the relay (NodeOptionsImport; it runs as the payload and is no
// boundary).
//
// It must never trust a byte the relay sends (invariant I12: bounded reads,
// strict parsing, every limit enforced here), never resolve a name twice
// for one connection (it dials exactly the address it checked, so there is
// no DNS-rebinding window), never terminate TLS, never reach an address of
// the host itself, never pass a ClientHello whose real server name it
// cannot read (ECH, ESNI), and never reach an address that is not public
// unless the operator opted its range in (Config.AllowNets, never loopback,
// link-local, multicast or unspecified) or a TESTONLY switch, honoured only
// in a binary built with the sandboxd_testonly tag, says so.
package egress
