// Package layout holds no code: its tests check rules about the repository
// as a whole that no single package can check about itself. Every package
// has exactly one package doc comment (tailscale's pkgdoc_test.go is the
// model), the binary that carries the capabilities links only the packages
// in a reviewed golden list (tailscale's depaware.txt), the unprivileged
// binaries never link the privileged ones' dependencies, and the documents
// stand alone (every relative link resolves inside the repository).
//
// It must never be imported: it exists for its tests.
package layout
