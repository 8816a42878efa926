# sandboxd warm stub (python): the code of a warm pool sandbox. The cold
# bootstrap (nsinit/config pythonBootstrap) runs this file as __main__ like
# any payload; it then blocks on ONE request header on stdin and turns the
# process into what a cold launch of the request's code would be. Output is
# never framed: stdout and stderr stay the payload's pipes (I3, pipe speed).
#
# Header (written by the supervisor, package supervisor warmHeader): a
# 4-byte big-endian length, then that many bytes: fields, each a 4-byte
# big-endian length and its bytes: the code, then NAME=value entries of the
# request's env. Exactly the header is read from fd 0, never more: what
# follows is the payload's stdin.
#
# No name of this file survives into the payload's namespace: the globals
# the bootstrap made are snapshot on the first line and restored before the
# code runs, and every helper is a local.
_sandboxd_globals = dict(globals())


def _sandboxd_take():
    import os
    import sys

    def readn(n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = os.read(0, n - len(buf))
            except InterruptedError:
                continue
            if not chunk:
                # EOF before a request: the pool destroyed this sandbox.
                os._exit(0)
            buf += chunk
        return buf

    hdr = readn(int.from_bytes(readn(4), "big"))
    fields, i = [], 0
    while i < len(hdr):
        n = int.from_bytes(hdr[i:i + 4], "big")
        fields.append(hdr[i + 4:i + 4 + n])
        i += 4 + n
    src, env = fields[0], fields[1:]
    filename = sys.argv[0]
    # The environment: the base (and the environment's) variables this
    # process started with, overlaid by the request's, in sorted order as
    # the helper writes them (nsinit.PayloadEnv).
    merged = dict(os.environb)
    for kv in env:
        name, _, value = kv.partition(b"=")
        merged[name] = value
    os.environb.clear()
    for name in sorted(merged):
        os.environb[name] = merged[name]
    # Tracebacks print the code's own lines, not this stub's (the file on
    # disk is this stub): the traceback module reads linecache; the C
    # printer of an uncaught exception (the main thread's, below, and a
    # thread's, _thread._excepthook) opens the file through io.open and
    # needs a real fd, so it gets a memfd of the code.
    import _thread
    import io
    import linecache
    text = src.decode("utf-8", "surrogateescape")
    linecache.cache[filename] = (len(src), None, text.splitlines(True), filename)
    real_open = io.open

    def source_open(file, *a, **k):
        if file == filename:
            fd = os.memfd_create("main.py", os.MFD_CLOEXEC)
            os.write(fd, src)
            os.lseek(fd, 0, os.SEEK_SET)
            return real_open(fd, "rb")
        return real_open(file, *a, **k)

    def thread_hook(args, hook=_thread._excepthook):
        io.open = source_open
        try:
            return hook(args)
        finally:
            io.open = real_open

    _thread._excepthook = thread_hook
    threading = sys.modules.get("threading")
    if threading is not None:
        threading.excepthook = threading.__excepthook__ = thread_hook

    def uncaught(e):
        # From here on only the interpreter's top-level printer runs.
        io.open = source_open
        if isinstance(e, SyntaxError) and e.filename == filename and e.lineno:
            # The parser took the line from the file on disk (this stub),
            # as a cold launch takes it from the code's file.
            lines = text.splitlines(True)
            if 0 < e.lineno <= len(lines):
                e.text = lines[e.lineno - 1]

    # The except clause below reaches it through _thread, not a global.
    thread_hook.sandboxd_uncaught = uncaught
    g = sys.modules["__main__"].__dict__
    keep = g.pop("_sandboxd_globals")
    g.clear()
    g.update(keep)
    return src, filename, "exec"


# Compiled and run at module level of this file, in its globals (now the
# cold ones), so that an uncaught exception's traceback is the cold one: the
# bootstrap's "<string>" frame, then the code's. This frame's own entry is
# cut before it propagates.
try:
    exec(compile(*_sandboxd_take()))
except BaseException as __sandboxd_e:
    __sandboxd_e.__traceback__ = __sandboxd_e.__traceback__.tb_next
    getattr(__import__("_thread")._excepthook, "sandboxd_uncaught", id)(__sandboxd_e)
    raise
