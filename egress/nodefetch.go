package egress

import (
	_ "embed"
	"net/url"
	"strings"
)

// nodeFetch is the module that sends Node's built-in fetch through the
// relay (Node before 24 ignores the proxy variables); it runs inside the
// sandbox, as the payload, and is no boundary.
//
//go:embed nodefetch.mjs
var nodeFetch string

// NodeOptionsImport is the NODE_OPTIONS flag that loads the fetch module
// before the program, as a data: URL: nothing is written into or bound into
// the sandbox for it, and a "none" exec never gets it.
func NodeOptionsImport() string {
	return "--import=data:text/javascript," + url.PathEscape(nodeFetch)
}

// WithNodeOptionsImport returns the NODE_OPTIONS value of an egress exec
// whose request set cur: cur with the import added once.
func WithNodeOptionsImport(cur string) string {
	imp := NodeOptionsImport()
	if strings.Contains(cur, imp) {
		return cur
	}
	if strings.TrimSpace(cur) == "" {
		return imp
	}
	return cur + " " + imp
}
