package launch

import (
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/cgroup"
)

func TestMergeUsage(t *testing.T) {
	ru := Usage{CPUMS: 14, MaxRSSKB: 16000, Source: api.UsageSourceRusage}
	for _, tc := range []struct {
		name     string
		cg, base cgroup.Usage
		want     Usage
	}{
		{"cgroup, both counters", cgroup.Usage{CPU: 312 * time.Millisecond, CPUKnown: true, PeakBytes: 230 << 20, PeakKnown: true}, cgroup.Usage{},
			Usage{CPUMS: 312, MaxRSSKB: 230 << 10, Source: api.UsageSourceCgroup}},
		{"warm: the build's CPU is not the exec's", cgroup.Usage{CPU: 400 * time.Millisecond, CPUKnown: true, PeakBytes: 1 << 20, PeakKnown: true}, cgroup.Usage{CPU: 90 * time.Millisecond, CPUKnown: true},
			Usage{CPUMS: 310, MaxRSSKB: 1 << 10, Source: api.UsageSourceCgroup}},
		{"v2 before 5.19: no memory.peak", cgroup.Usage{CPU: 300 * time.Millisecond, CPUKnown: true}, cgroup.Usage{},
			Usage{CPUMS: 300, MaxRSSKB: 16000, Source: api.UsageSourceMixed}},
		{"no counters at all", cgroup.Usage{}, cgroup.Usage{}, Usage{CPUMS: 14, MaxRSSKB: 16000, Source: api.UsageSourceRusage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeUsage(tc.cg, tc.base, ru); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
