package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage is what an exec's cgroup measured of everything that ran in it.
// A resource whose counter this kernel does not keep is marked unknown, so
// that the caller can fall back to another source and say so.
type Usage struct {
	// CPU is user plus system time: v1 cpuacct.usage (in the cpuacct
	// hierarchy, or the cpu one where they are mounted together), v2
	// cpu.stat usage_usec.
	CPU      time.Duration
	CPUKnown bool
	// PeakBytes is the highest memory use (page cache included): v1
	// memory.max_usage_in_bytes, v2 memory.peak (Linux 5.19+).
	PeakBytes int64
	PeakKnown bool
}

// Usage reads the cgroup's CPU time and memory peak now. Read it after the
// exec's processes are gone (and before Remove) for the exec's total.
func (e *Exec) Usage() Usage {
	var u Usage
	if e.mode == ModeV2 {
		dir := e.dirs[""]
		if usec, ok := counterOK(filepath.Join(dir, "cpu.stat"), "usage_usec"); ok {
			u.CPU, u.CPUKnown = time.Duration(usec)*time.Microsecond, true
		}
		if e.peak != nil {
			u.PeakBytes, u.PeakKnown = readIntAt(e.peak)
		} else {
			u.PeakBytes, u.PeakKnown = readInt(filepath.Join(dir, "memory.peak"))
		}
		return u
	}
	acct := e.dirs["cpuacct"] // its own hierarchy, or none: cpu,cpuacct
	if acct == "" {
		acct = e.dirs["cpu"]
	}
	if ns, ok := readInt(filepath.Join(acct, "cpuacct.usage")); ok {
		u.CPU, u.CPUKnown = time.Duration(ns), true
	}
	u.PeakBytes, u.PeakKnown = readInt(filepath.Join(e.dirs["memory"], "memory.max_usage_in_bytes"))
	return u
}

// ResetPeak starts the memory peak afresh (a warm sandbox's cgroup, when a
// request takes it: the build's peak is not the exec's). v1 resets
// memory.max_usage_in_bytes for every reader; v2 (Linux 6.12+) resets
// memory.peak for reads through the file descriptor written to, which the
// Exec keeps for Usage. Where the kernel cannot reset it, the error says
// so and the peak keeps counting from the cgroup's start.
func (e *Exec) ResetPeak() error {
	if e.mode != ModeV2 {
		return writeFile(filepath.Join(e.dirs["memory"], "memory.max_usage_in_bytes"), "0")
	}
	e.closePeak()
	f, err := os.OpenFile(filepath.Join(e.dirs[""], "memory.peak"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("reset"); err != nil {
		return errors.Join(err, f.Close())
	}
	e.peak = f
	return nil
}

func (e *Exec) closePeak() {
	if e.peak != nil {
		_ = e.peak.Close()
		e.peak = nil
	}
}

// readInt reads a file holding one integer.
func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// readIntAt reads one integer from the start of an open file.
func readIntAt(f *os.File) (int64, bool) {
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return 0, false
	}
	v, perr := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	return v, perr == nil
}

// counterOK reads "name N" from a flat keyed file (memory.events,
// cpu.stat), and whether it was there.
func counterOK(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
