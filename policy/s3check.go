package policy

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// The S3 parameters' syntax, shared by the operator's flags and the live
// settings an admin may change, so both refuse exactly the same values.

var (
	// bucketRE: S3's bucket naming rules (3-63 characters of lower-case
	// letters, digits, dots and hyphens, starting and ending with a letter
	// or digit); the dots-and-IP-address refinements are left to the server.
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// regionRE: AWS regions and what MinIO, Ceph RGW and versitygw accept.
	regionRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// prefixRE: object-name characters that need no escaping anywhere.
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{0,256}$`)
)

// CheckS3Endpoint accepts http(s)://host[:port], with no path, user or query.
func CheckS3Endpoint(e string) error {
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want http(s)://host[:port] (no path, user or query)", e)
	}
	return nil
}

// CheckS3Bucket accepts an S3 bucket name.
func CheckS3Bucket(b string) error {
	if !bucketRE.MatchString(b) || strings.Contains(b, "..") {
		return fmt.Errorf("%q: want an S3 bucket name (3-63 of a-z, 0-9, '.', '-')", b)
	}
	return nil
}

// CheckS3Region accepts a region name.
func CheckS3Region(r string) error {
	if !regionRE.MatchString(r) {
		return fmt.Errorf("%q: want a region name (1-64 of A-Z, a-z, 0-9, '_', '-')", r)
	}
	return nil
}

// CheckS3Prefix accepts "" or a relative prefix ending in "/", of plain
// object-name characters and with no ".." element.
func CheckS3Prefix(p string) error {
	if p == "" {
		return nil
	}
	if !prefixRE.MatchString(p) || !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") || strings.Contains(p, "..") || strings.Contains(p, "//") {
		return fmt.Errorf("%q: want a relative prefix ending in / (A-Z, a-z, 0-9, '.', '_', '-', '/'; no ..)", p)
	}
	return nil
}
