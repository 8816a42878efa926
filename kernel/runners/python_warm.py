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
    # What the take and the exit use is imported while the sandbox is idle,
    # not after the request arrives: linecache alone (with tokenize, re
    # and enum) is about 7 ms of a python start. These modules are then in
    # sys.modules before the code runs, the one difference from a cold
    # launch a program can see (docs/DESIGN.md, "Warm pool").
    import _thread
    import atexit  # noqa: F401 (the exit's)
    import builtins  # noqa: F401 (the exit's)
    import gc
    import io
    import linecache
    import types  # noqa: F401 (the exit's)

    # Everything alive now (the interpreter's start, the environment's
    # imports, this stub) moves to the collector's permanent generation:
    # the exit's collection and finalization (_sandboxd_exit) then walk
    # only what the code made, not the ~7,500 objects of the start (about
    # 4 ms). No object of the code exists yet, so none is exempt; the
    # difference a program can see is gc.get_freeze_count() and what
    # gc.get_objects() lists (docs/DESIGN.md, "Warm pool").
    gc.freeze()

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

    def use_source():
        io.open = source_open  # from here on only exit steps run

    # The clauses below reach them through _thread, not a global.
    thread_hook.sandboxd_uncaught = uncaught
    status, exit_, finalize = [0], _sandboxd_exit, _sandboxd_finalize
    exiting = _sandboxd_exiting
    thread_hook.sandboxd_exiting = lambda e, _: exiting(e, status, uncaught)
    thread_hook.sandboxd_exit = lambda: exit_(status[0], finalize, use_source)
    g = sys.modules["__main__"].__dict__
    keep = g.pop("_sandboxd_globals")
    g.clear()
    g.update(keep)
    return src, filename, "exec"


def _sandboxd_exiting(exc, status, uncaught):
    """True when the stub ends the process itself after exc, with the
    status kept in status[0]: a SystemExit with no code or a code of 0-255
    (dropped with its traceback: the interpreter frees them, and the
    frames' locals, before it finalizes), or an uncaught exception, printed
    here as the interpreter prints it (sys.last_* set, the default
    sys.excepthook given the traceback from the bootstrap's frame on),
    status 1. False leaves exc to the interpreter: KeyboardInterrupt (it
    ends by SIGINT), a SystemExit with another code, or a sys.excepthook of
    the code's own."""
    import sys
    import types

    if isinstance(exc, SystemExit):
        code = exc.code
        if not (code is None or (isinstance(code, int) and 0 <= code <= 255)):
            return False
        status[0] = int(code or 0)
        todo = [exc]
        while todo:
            e = todo.pop()
            if e is not None:
                e.__traceback__ = None
                todo += [e.__cause__, e.__context__]
                e.__cause__ = e.__context__ = None
        return True
    if isinstance(exc, KeyboardInterrupt) or sys.excepthook is not sys.__excepthook__:
        return False
    uncaught(exc)
    boot = sys._getframe()
    while boot.f_back is not None:
        boot = boot.f_back  # the bootstrap's "<string>" frame, outermost
    tb = types.TracebackType(exc.__traceback__, boot, boot.f_lasti, boot.f_lineno)
    exc.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    sys.excepthook(type(exc), exc, tb)
    status[0] = 1
    return True


def _sandboxd_exit(code, finalize, use_source):
    """Ends the process with status code the way the interpreter would at
    the end of the code, without the interpreter's own teardown (module,
    object and memory cleanup: about 10 ms). Runs the steps of
    Py_FinalizeEx that the code can observe, in its order: non-daemon
    threads joined (threading._shutdown), atexit handlers, sys.stdout and
    sys.stderr flushed, a garbage collection, then what the module teardown
    finalizes (finalize), stdio flushed again, then os._exit. Returns,
    leaving the rest to the interpreter, when that exit would differ: a
    thread still running (a daemon thread keeps what it references alive
    through the teardown), or a flush that fails (the interpreter reports
    it and exits 120)."""
    import os
    import sys

    use_source()  # a traceback printed from here on shows the code's lines
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import _thread
    import atexit
    import builtins
    import gc
    import io
    import types

    atexit._run_exitfuncs()

    def flush_std():
        for f in (sys.stderr, sys.stdout):
            if f is not None and not getattr(f, "closed", True):
                try:
                    f.flush()
                except Exception:
                    return False
        return True

    if _thread._count() > 0 or not flush_std():
        return
    # The interpreter collects once before its module teardown, finalizing
    # garbage cycles of the code's own (with sys.stdout still the code's).
    if gc.isenabled():
        gc.collect()
    # The module teardown's first step: what it resets before any object
    # of the code is finalized.
    builtins._ = None
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    for name in ("path", "argv", "ps1", "ps2", "last_type", "last_value", "last_traceback",
                 "path_hooks", "path_importer_cache", "meta_path", "__interactivehook__"):
        setattr(sys, name, None)
    finalize(gc, io, types)
    if not flush_std():
        os._exit(120)  # as the interpreter: the teardown is past undoing
    os._exit(code)


def _sandboxd_finalize(gc, io, types):
    """Finalizes, in the collector's order, what the interpreter's module
    teardown would: objects with a __del__, suspended generators (their
    finally blocks run) and files still open (closed through the outermost
    wrapper, so that buffered data is written)."""
    import sys  # imported: sys.meta_path is None by now

    std = {id(f) for f in (sys.stdin, sys.stdout, sys.stderr)}
    # After the collection before the teardown every survivor is in the
    # oldest generation, in the order the teardown's final collection
    # finalizes them.
    objs = gc.get_objects()
    iobase = io.IOBase.__mro__[1]  # _io._IOBase: a C type check, not the ABC's
    kinds = {}  # type -> "gen", "io", "del" or None: decided once per type
    for t in {type(o) for o in objs}:
        if issubclass(t, types.GeneratorType):
            kinds[t] = "gen"
        elif issubclass(t, iobase):
            kinds[t] = "io"
        elif isinstance(getattr(t, "__del__", None), types.FunctionType):
            kinds[t] = "del"
    inner = set()
    for o in objs:
        if kinds.get(type(o)) == "io":
            for attr in ("buffer", "raw"):
                try:
                    inner.add(id(getattr(o, attr)))
                except (AttributeError, ValueError):  # none, or detached
                    pass
    for o in objs:
        t = type(o)
        kind = kinds.get(t)
        if kind is None:
            continue
        try:
            if kind == "gen":
                if o.gi_frame is not None and o.gi_suspended:
                    o.close()
            elif kind == "io":
                if id(o) not in std and id(o) not in inner and not o.closed:
                    o.close()
            else:
                t.__del__(o)
        except BaseException as e:
            # as the interpreter reports an exception in a finalizer during
            # its teardown: without this frame, and without source lines
            # (its io module is gone by then)
            e.__traceback__ = e.__traceback__.tb_next
            print("Exception ignored in: %r" % (getattr(t, "__del__", o),), file=sys.stderr)
            io_module, sys.modules["io"] = sys.modules.get("io"), None
            try:
                sys.__excepthook__(type(e), e, e.__traceback__)
            finally:
                sys.modules["io"] = io_module


# Compiled and run at module level of this file, in its globals (now the
# cold ones), so that an uncaught exception's traceback is the cold one: the
# bootstrap's "<string>" frame, then the code's. This frame's own entry is
# cut before it propagates.
try:
    exec(compile(*_sandboxd_take()))
except BaseException as __sandboxd_e:
    __sandboxd_e.__traceback__ = __sandboxd_e.__traceback__.tb_next
    if not getattr(__import__("_thread")._excepthook, "sandboxd_exiting", isinstance)(__sandboxd_e, ()):
        getattr(__import__("_thread")._excepthook, "sandboxd_uncaught", id)(__sandboxd_e)
        raise
# The code ended (or exited with a plain status, outside the except clause:
# no exception is being handled while the exit steps run).
getattr(__import__("_thread")._excepthook, "sandboxd_exit", int)()
