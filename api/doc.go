// Package api is the wire contract of docs/API.md and docs/openapi.yaml:
// every request and answer body of the sandboxd HTTP API, the error body
// with its closed set of codes, and the header names a caller reads.
//
// It owns the types. The supervisor, the Go client, sandboxctl, doctor and
// the integration tests all use these types, so there is exactly one copy
// of the contract in Go; the contract test in this package ties them to
// every example of docs/openapi.yaml and to the error table of docs/API.md.
//
// It must never import another sandboxd package (it is the leaf everything
// else imports), never hold behaviour beyond what the wire defines (no
// policy, no HTTP handling), and never change a JSON name without changing
// docs/API.md and docs/openapi.yaml in the same commit.
package api
