//go:build !sandboxd_testonly

package egress

// testOnlyBuild is false in every binary `make build` produces.
const testOnlyBuild = false
