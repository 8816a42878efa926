// Package e2b serves enough of E2B's sandbox protocol (the control API, the
// code interpreter on port 49999 and envd on port 49983, routed by the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers) that the official
// @e2b/code-interpreter SDK runs unmodified against sandboxd. docs/E2B.md
// lists the mapping and what is not supported.
//
// It owns the translation only: each E2B call becomes one or more calls of
// sandboxd's own API, made in-process through the supervisor's TCP handler
// with the caller's API key as the bearer, and each answer is translated
// back. It also owns the per-sandbox access tokens (random, checked in
// constant time) that stand for the creating key on the sandbox routes.
//
// It must never decide who may do what on its own: no second
// authentication, limit or audit path, no direct access to sessions, files
// or kernels. Whatever the API refuses, it refuses, with the API's reason.
package e2b
