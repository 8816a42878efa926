// Package protocol owns the wire format of the kernel channel: the NDJSON
// requests the supervisor writes to a kernel runner's fd 0 and the frames
// the runner writes back on fd 1 (docs/KERNELS.md is the reference).
//
// Everything a kernel sends is untrusted input (invariant I12): the runner
// executes caller code in the same process, so any byte on the channel may
// have been written by that code. The decoder therefore bounds every line
// to MaxFrameBytes before looking at it (the line buffer never grows past
// the limit, so reading a line allocates at most twice the limit in all,
// whatever the kernel sends), requires valid UTF-8 without NUL bytes,
// rejects unknown types, unknown or duplicate fields and trailing data, and
// validates every field's range. It must never trust a byte the kernel
// sends, never use an unbounded reader, and never recover from a protocol
// error: after one, the channel is poisoned and the kernel must be killed.
package protocol
