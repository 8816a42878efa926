//go:build sandboxd_testonly

package egress

// testOnlyBuild: this binary was built with -tags sandboxd_testonly, for
// the integration tests only; `make build` never sets the tag.
const testOnlyBuild = true
