package policy

import "github.com/sandboxd/sandboxd/api"

// Limits are what one exec is held to, after clamping to the operator's caps.
// They are echoed in the exec result's policy attestation and in the audit
// trail, so the type (and its field names) is the wire contract's: package
// api owns it, this package computes it.
type Limits = api.Limits

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
