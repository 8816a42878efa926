//go:build load || bench

package integration

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Helpers `make bench` and `make load` share.

var warmIdleLine = regexp.MustCompile(`(?m)^sandboxd_warm_pool_idle\{runtime="([^"]+)"\} (\d+)$`)

// warmIdleMetrics reads sandboxd_warm_pool_idle (empty without a pool).
func warmIdleMetrics(s *supervisor) map[string]int {
	_, body := s.do("GET", "/metrics", nil)
	out := map[string]int{}
	for _, m := range warmIdleLine.FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

func procStatus(pid string) map[string]string {
	b, _ := os.ReadFile("/proc/" + pid + "/status")
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// statusInt is the leading number of a /proc/PID/status field.
func statusInt(pid int, field string) (int, error) {
	v := procStatus(strconv.Itoa(pid))[field]
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
	}
	return strconv.Atoi(f[0])
}

// envInt is a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// pct is the q-quantile of d (0 when d is empty).
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[int(q*float64(len(s)-1))]
}

// msf renders d in milliseconds with two decimals.
func msf(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
