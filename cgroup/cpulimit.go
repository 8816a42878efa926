package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnCPULimit returns the CPUs the calling process's cgroups allow it: the
// smallest CPU bandwidth quota (v2 cpu.max, v1 cpu.cfs_quota_us over
// cpu.cfs_period_us) of its cgroup and every ancestor up to the
// hierarchy's mount. ok is false when no quota is set or none is readable
// (the caller then goes by the CPUs it may run on). It only reads.
func OwnCPULimit(h Host) (cpus float64, ok bool) {
	h = h.withDefaults()
	own, err := parseProcCgroup(filepath.Join(h.ProcSelf, "cgroup"))
	if err != nil {
		return 0, false
	}
	mounts, err := parseCgroupMounts(filepath.Join(h.ProcSelf, "mountinfo"))
	if err != nil {
		return 0, false
	}
	for _, ctl := range []string{"", "cpu"} {
		mnt, mounted := mounts[ctl]
		path, known := own[ctl]
		if !mounted || !known {
			continue
		}
		for dir := filepath.Join(mnt, path); strings.HasPrefix(dir, mnt); dir = filepath.Dir(dir) {
			if q, set := cpuQuota(dir, ctl == ""); set && (!ok || q < cpus) {
				cpus, ok = q, true
			}
			if dir == mnt {
				break
			}
		}
	}
	return cpus, ok
}

// cpuQuota reads dir's CPU bandwidth quota in CPUs; set is false for "max"
// (v2), -1 (v1), or a file that cannot be read.
func cpuQuota(dir string, v2 bool) (cpus float64, set bool) {
	var quota, period string
	if v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return 0, false
		}
		quota, period = f[0], f[1]
	} else {
		q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
		p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
		if err1 != nil || err2 != nil {
			return 0, false
		}
		quota, period = strings.TrimSpace(string(q)), strings.TrimSpace(string(p))
	}
	qn, err1 := strconv.ParseInt(quota, 10, 64)
	pn, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || qn <= 0 || pn <= 0 {
		return 0, false
	}
	return float64(qn) / float64(pn), true
}
