// Package procstatus reads fields of a /proc/PID/status file (proc(5)):
// the one parser the host checks and the cgroup sweep share.
//
// It owns no I/O: callers read the file (through their own host
// abstraction, or a fake in tests) and pass its bytes. It must never be
// linked into the helper, whose own checks stay in package nsinit.
package procstatus

import "strings"

// Field returns the value of key in status, the content of a
// /proc/PID/status file, trimmed of surrounding white space, and whether
// the key was there.
func Field(status []byte, key string) (string, bool) {
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && k == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
