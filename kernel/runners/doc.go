// Package runners owns the programs that run inside a session's sandbox as
// its kernels: the Python and JavaScript runners, embedded here so that
// the supervisor passes them as the payload's code. They speak
// kernel/protocol on fd 0 and fd 1 (docs/KERNELS.md). It also owns the
// warm stubs (python_warm.py, javascript_warm.js): the code of a warm pool
// sandbox, which reads one request header (WarmHeader) from fd 0 and then
// becomes a cold launch of that request's code; they never frame output.
// At the end they exit as a cold launch would (threads joined, exit
// handlers, buffered output and finalizers) but skip the interpreter's own
// teardown, which nothing outside the process can observe.
//
// The runners are convenience, not a boundary: they run in the same
// process as caller code, so nothing they send is trusted (invariant I12;
// kernel/protocol's decoder enforces that). They must never read a file or
// environment variable of the host, and never write anything but frames on
// the channel.
package runners
