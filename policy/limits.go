package policy

import "time"

// Limits are what one exec is held to, after clamping to the operator's caps.
// They are echoed in the exec result's policy attestation and in the audit
// trail, so field names are part of the wire contract.
type Limits struct {
	TimeoutMS        int64   `json:"timeout_ms"`
	OutputLimitBytes int64   `json:"output_limit_bytes"` // per stream
	TmpSizeBytes     int64   `json:"tmp_size_bytes"`
	MemoryBytes      int64   `json:"memory_bytes"`
	Pids             int64   `json:"pids"`
	CPUs             float64 `json:"cpus"`
	NoFile           uint64  `json:"nofile"`
	FileSizeBytes    uint64  `json:"file_size_bytes"`
}

// Timeout returns the exec timeout as a duration.
func (l Limits) Timeout() time.Duration { return time.Duration(l.TimeoutMS) * time.Millisecond }

// Limits returns the limits an exec with the given (already clamped) timeout
// is held to. Every other limit is the operator's setting as is: a request
// cannot ask for more, and there is nothing to ask for less of yet.
func (c Config) Limits(timeoutMS int64) Limits {
	return Limits{
		TimeoutMS:        timeoutMS,
		OutputLimitBytes: c.OutputLimitBytes,
		TmpSizeBytes:     c.TmpSizeBytes,
		MemoryBytes:      c.MemoryBytes,
		Pids:             c.Pids,
		CPUs:             c.CPUs,
		NoFile:           c.NoFile,
		// RLIMIT_FSIZE is the workspace quota: no single file may be larger
		// than the whole workspace may hold, and the kernel enforces that per
		// write even where no disk quota exists.
		FileSizeBytes: uint64(c.WorkspaceQuotaBytes),
	}
}
