# sandboxd Python kernel runner (docs/KERNELS.md is the reference).
#
# Runs inside the sandbox as the payload program. fd 0 carries requests
# from the supervisor and fd 1 carries frames back; both are moved to
# private close-on-exec descriptors at start, and fd 0/1/2 are replaced so
# that nothing user code does (print, os.write(1, ...), subprocesses) can
# write raw bytes onto the channel. The supervisor trusts nothing written
# here (invariant I12); this program only keeps honest code from
# corrupting the channel by accident.
import _collections_abc
import ast
import binascii
import builtins
import codecs
import io
import json
import linecache
import os
import queue
import signal
import sys
import threading
import types

# Not imported here, though the runner uses what they do: inspect (with
# dis), platform and base64 cost about a fifth of the runner's start
# (python -X importtime), which a session's first output waits for; the
# few lines of each it needs are below. traceback is imported when an
# exception is first described.

# CO_COROUTINE, CO_ITERABLE_COROUTINE: inspect's code flags (Include/cpython/code.h).
CO_COROUTINE, CO_ITERABLE_COROUTINE = 0x0080, 0x0100


def isawaitable(value):
    """inspect.isawaitable: a coroutine, a generator-based coroutine, or an
    object with __await__."""
    return (isinstance(value, types.CoroutineType)
            or isinstance(value, types.GeneratorType) and bool(value.gi_code.co_flags & CO_ITERABLE_COROUTINE)
            or isinstance(value, _collections_abc.Awaitable))

MAX_FRAME_BYTES = 32 << 20  # protocol.MaxFrameBytes; a Go test checks they agree
READ_CHUNK = 64 << 10
SYNC_PREFIX = b"\x00\x1bsandboxd-sync-"
SYNC_LEN = len(SYNC_PREFIX) + 32 + 1  # the prefix, 16 random bytes in hex, NUL
RUNNER_FILE = __file__ if "__file__" in globals() else "<runner>"


class Channel:
    """The frame channel: one lock so that frames from the stream reader
    threads and the main thread never interleave within a line."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, frame):
        line = json.dumps(frame, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode() + b"\n"
        if len(line) - 1 > MAX_FRAME_BYTES:
            raise FrameTooLarge("frame of %d bytes over the %d-byte limit" % (len(line) - 1, MAX_FRAME_BYTES))
        with self.lock:
            view = memoryview(line)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]


class FrameTooLarge(Exception):
    pass


class StreamPump(threading.Thread):
    """Turns everything written to one of fd 1/fd 2 into stream frames, as
    it arrives (no buffering beyond one read). A per-sync random marker
    written by the main thread tells it that everything before the marker
    has been sent; output arriving while no exec runs waits in the pipe
    (back-pressure) and goes to the next exec."""

    def __init__(self, kernel, name, read_fd):
        super().__init__(daemon=True, name="pump-" + name)
        self.kernel, self.name, self.fd = kernel, name, read_fd
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending = b""
        self.marker = None
        self.seen = threading.Event()
        self.cond = threading.Condition()

    def expect(self, marker):
        with self.cond:
            self.marker = marker
            self.seen.clear()

    def emit(self, data):
        text = self.decoder.decode(data)
        if not text:
            return
        # Send under the state lock: the main thread clears `current` under
        # it before sending the result, so no stream frame of an exec can
        # follow its result.
        with self.kernel.state:
            while self.kernel.current is None:
                self.kernel.state.wait()
            self.kernel.chan.send({"type": "stream", "id": self.kernel.current, "name": self.name, "data": text})

    def run(self):
        while True:
            try:
                data = os.read(self.fd, READ_CHUNK)
            except InterruptedError:
                continue
            if not data:
                return
            self.consume(self.pending + data)

    def consume(self, buf):
        """Sends buf as output, less every sync marker in it. Any marker is
        dropped, not only the one the main thread waits for: a marker whose
        sync was abandoned, or one a forked copy of the runner wrote into
        the shared pipe, is never caller output."""
        self.pending = b""
        while True:
            at = buf.find(SYNC_PREFIX)
            if at < 0 or len(buf) - at < SYNC_LEN:
                break
            self.emit(buf[:at])
            mark, buf = buf[at:at + SYNC_LEN], buf[at + SYNC_LEN:]
            with self.cond:
                hit = mark == self.marker
                if hit:
                    self.marker = None
            if hit:
                self.seen.set()
        # hold back a tail that could be the start of a marker
        for k in range(min(SYNC_LEN - 1, len(buf)), 0, -1):
            tail = buf[-k:]
            if tail.startswith(SYNC_PREFIX) or SYNC_PREFIX.startswith(tail):
                self.pending, buf = tail, buf[:-k]
                break
        self.emit(buf)


class ExitRequested(Exception):
    pass


class Kernel:
    def __init__(self, once):
        self.once = once
        self.count = 0
        self.current = None  # exec id of the running exec
        self.state = threading.Condition()
        self.in_user_code = False
        self.pending_interrupt = False
        self.early_interrupt = None  # id of an exec interrupted before it began
        self.sync_lock = threading.Lock()
        self.requests = queue.Queue()
        self.loop = None
        self.pid = os.getpid()  # a forked copy of the runner is not the runner
        self._setup_fds()
        self._setup_namespace()

    # -- descriptors -------------------------------------------------------
    def _setup_fds(self):
        # os.dup makes non-inheritable copies: subprocesses never get them.
        self.req_fd = os.dup(0)
        self.chan = Channel(os.dup(1))
        self.diag_fd = os.dup(2)
        self.devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(self.devnull, 0)
        self.pumps = {}
        self.pipe_w = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            r, w = os.pipe()
            os.dup2(w, fd)
            self.pipe_w[name] = w  # private copy, to restore fd 1/2 per exec
            self.pumps[name] = StreamPump(self, name, r)
            self.pumps[name].start()
        self.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                       errors="backslashreplace", write_through=True)
        self.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                       errors="backslashreplace", write_through=True)

    def diag(self, msg):
        try:
            os.write(self.diag_fd, ("kernel: %s\n" % msg).encode("utf-8", "replace")[:4096])
        except OSError:
            pass

    def _setup_namespace(self):
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        builtins.display = self.display
        cwd = os.getcwd()
        runner_dir = os.path.dirname(os.path.abspath(RUNNER_FILE)) if RUNNER_FILE != "<runner>" else None
        sys.path[:] = [p for p in sys.path if p not in ("", runner_dir)]
        sys.path.insert(0, cwd)
        os.environ["MPLBACKEND"] = "Agg"
        sys.meta_path.insert(0, ShowHooks(self.display))
        sys.meta_path.append(IPythonShim(self.display))
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum, frame):
        # Raise only inside user code: an interrupt racing the end of an
        # exec must not break the runner itself.
        if self.in_user_code:
            raise KeyboardInterrupt
        with self.state:
            if self.current is not None:
                self.pending_interrupt = True  # raised when user code resumes

    # -- requests ----------------------------------------------------------
    def read_requests(self):
        f = os.fdopen(self.req_fd, "rb", buffering=READ_CHUNK)
        for line in f:
            try:
                req = json.loads(line)
                kind = req["type"]
            except (ValueError, KeyError, TypeError) as e:
                self.diag("bad request: %s" % e)
                continue
            if kind == "interrupt":
                with self.state:
                    hit = self.current is not None and self.current == req.get("id")
                    if not hit:
                        # the exec is still queued (a slow start under CPU
                        # throttling): it begins interrupted
                        self.early_interrupt = req.get("id")
                if hit:
                    os.kill(os.getpid(), signal.SIGINT)
            else:
                self.requests.put(req)
        self.requests.put({"type": "shutdown"})

    def serve(self):
        self.chan.send({"type": "ready", "language": "python", "version": sys.version.split()[0]})
        threading.Thread(target=self.read_requests, daemon=True, name="requests").start()
        while True:
            req = self.requests.get()
            if req.get("type") == "shutdown":
                return 0
            if req.get("type") != "execute":
                self.diag("unknown request type %r" % req.get("type"))
                continue
            code = self.execute(req)
            if self.once:
                return code

    # -- one exec ----------------------------------------------------------
    def execute(self, req):
        self.count += 1
        exec_id = str(req.get("id", ""))
        self.pending_interrupt = False
        saved_env = apply_env(req.get("env"))
        self._begin(exec_id, req.get("stdin") or "")
        result = {"type": "result", "id": exec_id, "exit_code": 0, "execution_count": self.count}
        try:
            self._run(req, result)
        except BaseException as e:  # a bug of the runner: report, keep serving
            result["exit_code"] = 1
            result["exception"] = {"type": "KernelError", "message": "runner: %r" % (e,), "traceback": ""}
        finally:
            restore_env(saved_env)
        if self.forked():
            self._child_exit(result["exit_code"])
        self._sync_streams()
        self._end()
        try:
            self.chan.send(result)
        except (FrameTooLarge, ValueError) as e:
            result.pop("return_value", None)
            result["exit_code"] = 1
            result["exception"] = {"type": "ReturnValueTooLarge", "message": str(e), "traceback": ""}
            self.chan.send(result)
        return result["exit_code"]

    def forked(self):
        """True in a copy of the runner made by os.fork() in caller code. It
        has no stream pumps (threads do not survive fork) and shares the
        runner's pipes and channel: a sync marker or frame it wrote would
        reach the runner's output or break the channel."""
        return os.getpid() != self.pid

    def _child_exit(self, code):
        """Ends a forked copy that returned into the runner instead of
        exiting, the way the interpreter ends a script."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(code)

    def _begin(self, exec_id, stdin):
        for name, fd in (("stdout", 1), ("stderr", 2)):
            os.dup2(self.pipe_w[name], fd)  # user code may have closed or redirected them
        sys.stdout, sys.stderr = self.stdout, self.stderr
        r, w = os.pipe()
        os.dup2(r, 0)
        os.close(r)
        threading.Thread(target=self._feed_stdin, args=(w, stdin.encode("utf-8", "replace")), daemon=True).start()
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
        with self.state:
            self.current = exec_id
            if self.early_interrupt == exec_id:
                self.pending_interrupt = True  # raised when user code starts
            self.early_interrupt = None
            self.state.notify_all()

    @staticmethod
    def _feed_stdin(w, data):
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except OSError:
            pass  # the exec ended without reading all of it
        finally:
            os.close(w)

    def _end(self):
        os.dup2(self.devnull, 0)  # the stdin feeder gets EPIPE and ends
        with self.state:
            self.current = None

    def _sync_streams(self):
        """Returns once everything written to fd 1/2 before the call has
        been sent as stream frames. Serialised: a display() from a caller
        thread must not replace the marker the main thread waits for."""
        with self.sync_lock:
            self._sync_streams_locked()

    def _sync_streams_locked(self):
        for name, fd in (("stdout", 1), ("stderr", 2)):
            for f in (sys.stdout, sys.stderr, self.stdout, self.stderr):
                try:
                    f.flush()
                except Exception:
                    pass
            marker = SYNC_PREFIX + os.urandom(16).hex().encode() + b"\x00"
            pump = self.pumps[name]
            pump.expect(marker)
            os.write(self.pipe_w[name], marker)
            pump.seen.wait()

    def _run(self, req, result):
        filename = "<exec-%d>" % self.count
        try:
            self._user(lambda: self._run_code(req.get("code") or "", filename))
            entry = req.get("entrypoint") or ""
            if entry:
                result["return_value"] = self._user(lambda: self._call_entry(entry, req.get("inputs")))
        except ExitRequested as e:
            result["exit_code"] = e.args[0]
        except BaseException as e:
            result["exit_code"] = 1
            result["exception"] = self._describe(e)
        finally:
            self._show_figures()

    def _user(self, fn):
        """Runs fn as user code: interruptible, SystemExit mapped to an exit
        code the way the interpreter would map it."""
        try:
            # inside the try: a pending interrupt raised here must not leave
            # in_user_code set, or a later SIGINT would raise inside the
            # runner's own stream sync
            self._resume_user()
            return fn()
        except SystemExit as e:
            raise ExitRequested(self._exit_code(e.code)) from None
        finally:
            self.in_user_code = False

    def _resume_user(self):
        self.in_user_code = True
        if self.pending_interrupt:
            self.pending_interrupt = False
            raise KeyboardInterrupt

    def _exit_code(self, code):
        if code is None:
            return 0
        if isinstance(code, int):  # bool included, as the interpreter does
            return code & 0xFF
        print(code, file=sys.stderr)
        return 1

    def _run_code(self, code, filename):
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self._eval(compile(tree, filename, "exec", flags=flags))
        if last is not None:
            value = self._eval(compile(last, filename, "eval", flags=flags))
            if value is not None:
                self.ns["_"] = value
                self.display(value)

    def _eval(self, code):
        value = eval(code, self.ns)
        if code.co_flags & CO_COROUTINE:
            value = self._await(value)
        return value

    def _await(self, awaitable):
        if self.loop is None:
            # Imported on first use: asyncio costs more to import than the
            # interpreter takes to start, and most execs never await.
            import asyncio

            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(awaitable)

    def _call_entry(self, name, inputs):
        fn = self.ns.get(name)
        if not callable(fn):
            raise EntrypointError("the code defines no function %r to call" % name)
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, dict):
            raise EntrypointError("inputs must be a JSON object")
        value = fn(**inputs)
        if isawaitable(value):
            value = self._await(value)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ReturnValueError("%s() returned a value that is not JSON-serialisable: %s" % (name, e)) from None
        return value

    def _describe(self, e):
        todo, seen = [e], set()
        while todo:  # e and the exceptions chained to it
            x = todo.pop()
            if x is None or id(x) in seen:
                continue
            seen.add(id(x))
            x.__traceback__ = self._caller_frames(x.__traceback__)
            todo += [x.__cause__, x.__context__]
        import traceback

        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        try:
            self.stderr.write(text)
        except Exception:
            pass
        return {"type": type(e).__name__, "message": str(e), "traceback": text}

    @staticmethod
    def _caller_frames(tb):
        """tb without the runner's frames before the caller's first and after
        its last: the runner's call into caller code, and the SIGINT handler
        that raised KeyboardInterrupt on top of the caller's frame. They are
        noise to the caller, and name the runner's file."""
        while tb is not None and tb.tb_frame.f_code.co_filename == RUNNER_FILE:
            tb = tb.tb_next
        last, t = None, tb
        while t is not None:
            if t.tb_frame.f_code.co_filename != RUNNER_FILE:
                last = t
            t = t.tb_next
        if last is not None:
            last.tb_next = None  # writable since Python 3.7
        return tb

    # -- rich output -------------------------------------------------------
    def display(self, *objs, raw=False, **_ignored):
        """The display() builtin (and IPython.display.display): every rich
        representation each object has (rich_bundle), or with raw=True each
        object is itself a MIME bundle (a dict of MIME type to data).
        IPython's other keywords (include, metadata, display_id, ...) are
        accepted and have no effect."""
        # No interrupt mid-frame. Only the main thread runs signal handlers,
        # so only its calls need masking.
        on_main = threading.current_thread() is threading.main_thread()
        masked = on_main and self.in_user_code
        if masked:
            self.in_user_code = False
        try:
            for obj in objs:
                bundle = raw_bundle(obj) if raw else rich_bundle(obj)
                for mime in DISPLAY_ORDER:
                    if mime in bundle:
                        self._send_display(mime, bundle[mime])
        finally:
            if masked:
                self._resume_user()

    def _send_display(self, mime, payload):
        if self.forked():
            self.diag("display in a forked process dropped")
            return
        with self.state:
            exec_id = self.current
        if exec_id is None:
            self.diag("display outside an exec dropped")
            return
        self._sync_streams()  # keep prints before a display ahead of it
        frame = {"type": "display", "id": exec_id, "mime": mime}
        if mime in BINARY_MIMES:
            frame["data_base64"] = binascii.b2a_base64(payload, newline=False).decode("ascii")
        else:
            frame["data"] = payload
        try:
            with self.state:  # as in StreamPump.emit: never after the result
                if self.current != exec_id:
                    self.diag("display after its exec ended dropped")
                    return
                self.chan.send(frame)
        except (FrameTooLarge, ValueError, TypeError) as e:
            self.stderr.write("display %s dropped: %s\n" % (mime, e))

    def _show_figures(self):
        """The inline backend's behaviour: every figure still open at the end
        of an exec comes back as a PNG and is closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                self._send_display("image/png", figure_png(plt.figure(num)))
        except Exception as e:
            self.stderr.write("figure not rendered: %r\n" % (e,))
        finally:
            plt.close("all")


# -- per-exec environment ----------------------------------------------------
def apply_env(env):
    """Sets an exec's env in os.environ (and so in the C environment that
    subprocesses inherit) and returns what restore_env needs to undo it:
    each name's previous value, None for a name that was unset."""
    saved = {}
    if not isinstance(env, dict):
        return saved
    for name, value in env.items():
        # the supervisor's encoder refuses these; a variable os.environ
        # cannot hold is skipped rather than failing the exec
        if not isinstance(name, str) or not isinstance(value, str) or not name or "=" in name or "\0" in name + value:
            continue
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value
    return saved


def restore_env(saved):
    """Undoes apply_env: added names removed, replaced values put back. A
    name the exec's code changed on its own is left as the code left it."""
    for name, old in saved.items():
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# -- rich output ---------------------------------------------------------------
# The display MIME types the channel carries (kernel/protocol), in the order
# one object's representations are sent, and the rich-repr method of each.
REPR_METHODS = (
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
)
PLOTLY_MIME = "application/vnd.plotly.v1+json"
DISPLAY_ORDER = tuple(m for m, _ in REPR_METHODS) + (PLOTLY_MIME, "text/plain")
# Binary types travel as data_base64; the decoder checks their signature and
# kills a kernel that sends a wrong one, so the runner checks first.
BINARY_MIMES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
OBJECT_MIMES = ("application/json", PLOTLY_MIME)


def mime_payload(mime, value):
    """value as the channel carries mime, or None when it cannot be: bytes
    with the type's signature (a base64 string is decoded), a dict for the
    JSON types, a str for the text types."""
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]  # IPython's (data, metadata) form
    if mime in BINARY_MIMES:
        if isinstance(value, str):
            try:
                value = binascii.a2b_base64(value)  # base64.b64decode(value, validate=False)
            except ValueError:
                return None
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        if not isinstance(value, bytes) or not value.startswith(BINARY_MIMES[mime]):
            return None
        return value
    if mime in OBJECT_MIMES:
        return value if isinstance(value, dict) else None
    if mime in DISPLAY_ORDER:
        if isinstance(value, bytes) and mime == "image/svg+xml":
            value = value.decode("utf-8", "replace")
        return value if isinstance(value, str) else None
    return None  # a type the channel does not carry (widgets, javascript)


def raw_bundle(obj):
    """display(..., raw=True): obj is a MIME bundle already."""
    if not isinstance(obj, dict):
        return {}
    out = {}
    for mime, value in obj.items():
        payload = mime_payload(mime, value)
        if payload is not None:
            out[mime] = payload
    return out


def rich_bundle(obj):
    """Every representation of obj the channel carries, IPython's way:
    _repr_mimebundle_ first, then each _repr_*_ method for the types it
    left out, then text/plain (repr) unless an image was found or the repr
    is a placeholder ("<... object at 0x...>") beside a rich one. A
    matplotlib or plotly figure and a PIL image are rendered directly."""
    out = special_bundle(obj)
    if out is not None:
        return out
    bundle = call_repr(obj, "_repr_mimebundle_")
    if isinstance(bundle, tuple) and len(bundle) == 2:
        bundle = bundle[0]  # IPython's (data, metadata) form
    out = raw_bundle(bundle)
    for mime, meth in REPR_METHODS:
        if mime not in out:
            payload = mime_payload(mime, call_repr(obj, meth))
            if payload is not None:
                out[mime] = payload
    placeholder = type(obj).__repr__ is object.__repr__ or getattr(obj, "_sandboxd_placeholder_repr", False)
    if not any(m.startswith("image/") for m in out) and not (out and placeholder):
        out.setdefault("text/plain", repr(obj))
    return out


def call_repr(obj, meth):
    if isinstance(obj, type):
        return None  # a class's unbound _repr_html_ is not a representation
    fn = getattr(obj, meth, None)
    if not callable(fn):
        return None
    try:
        if meth == "_repr_mimebundle_":
            try:
                return fn(include=None, exclude=None)
            except TypeError:
                return fn()
        return fn()
    except Exception:
        return None  # as IPython: a failing repr is no representation


def special_bundle(obj):
    """The bundle of an object the inline backend renders itself, or None.
    Each check looks the type up only in an already imported module: the
    runner never imports a plotting library on its own."""
    fig = sys.modules.get("matplotlib.figure")
    if fig is not None and isinstance(obj, fig.Figure):
        return {"image/png": figure_png(obj)}
    pil = sys.modules.get("PIL.Image")
    if pil is not None and isinstance(obj, pil.Image):
        return {"image/png": pil_png(obj)}
    plotly = sys.modules.get("plotly.basedatatypes")
    if plotly is not None and isinstance(obj, plotly.BaseFigure):
        # plotly.js from its CDN: embedding it would add 3 MiB per figure
        return {"text/html": obj.to_html(full_html=False, include_plotlyjs="cdn"),
                PLOTLY_MIME: json.loads(obj.to_json())}
    return None


def figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def pil_png(img):
    if img.mode not in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
        img = img.convert("RGBA")  # CMYK, YCbCr, F, ...: PNG cannot hold them
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class ShowHooks:
    """A meta path finder, first on sys.meta_path, that patches the
    headless show() of a library right after the library's module is
    imported (and only then: the runner imports none of them itself), so
    that show() sends a display the way plt.show() does in the inline
    backend instead of trying to open a viewer that is not there."""

    def __init__(self, display):
        self.display = display
        self.patches = {"PIL.Image": self._patch_pil, "plotly.basedatatypes": self._patch_plotly}

    def find_spec(self, name, path, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run, patch=patch):
                    run(module)
                    patch(module)

                spec.loader.exec_module = exec_module  # this spec's own loader instance
                return spec
        return None

    def _patch_pil(self, module):
        display = self.display

        def show(self, title=None, **_ignored):
            """sandboxd: shows the image as an image/png display."""
            display(self)

        module.Image.show = show

    def _patch_plotly(self, module):
        display = self.display

        def show(self, *_args, **_ignored):
            """sandboxd: shows the figure as text/html and plotly JSON displays."""
            display(self)

        module.BaseFigure.show = show


# The modules of the IPython shim: IPython's display API, for code written
# for Jupyter, when IPython itself is not installed.
SHIM_MODULES = ("IPython", "IPython.display", "IPython.core", "IPython.core.display", "IPython.core.getipython")


class IPythonShim:
    """A meta path finder, last on sys.meta_path, that serves SHIM_MODULES
    only when no other finder has them: an installed IPython always wins."""

    def __init__(self, display):
        self.display = display
        self.api = None

    def find_spec(self, name, path, target=None):
        if name not in SHIM_MODULES:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self, is_package=name in ("IPython", "IPython.core"))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if self.api is None:
            self.api = ipython_display_api(self.display)
        module.__dict__.update(self.api)
        module.__doc__ = "sandboxd's stand-in for IPython's display API (IPython is not installed)."


# -- the IPython display shim ---------------------------------------------
# IPython.display's classes, for code written for Jupyter where IPython is
# not installed (IPythonShim serves them). Each shows as its MIME type
# through the rich-repr protocol; their repr is IPython's placeholder.
class DisplayObject:
    _sandboxd_placeholder_repr = True  # its repr is never a representation

    def __init__(self, data=None, url=None, filename=None, metadata=None, **_ignored):
        if isinstance(data, os.PathLike):
            data = os.fspath(data)
        if isinstance(data, str) and url is None and filename is None:
            if data.startswith(("http://", "https://")):
                url, data = data, None
            elif "\n" not in data and len(data) < 4096 and os.path.isfile(data):
                filename, data = data, None
        self.data, self.url, self.filename, self.metadata = data, url, filename, metadata
        if filename is not None:
            with open(filename, "rb") as f:
                self.data = self._from_file(f.read())

    def _from_file(self, raw):
        return raw.decode("utf-8", "replace")

    def __repr__(self):
        return "<IPython.core.display.%s object>" % type(self).__name__


class TextDisplayObject(DisplayObject):
    def _text(self):
        return self.data.decode("utf-8", "replace") if isinstance(self.data, bytes) else self.data


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self._text()


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self._text()


class Latex(TextDisplayObject):
    def _repr_latex_(self):
        return self._text()


class Math(TextDisplayObject):
    def _repr_latex_(self):
        text = (self._text() or "").strip("$")
        return "$\\displaystyle %s$" % text


class SVG(TextDisplayObject):
    def _repr_svg_(self):
        return self._text()


class Javascript(TextDisplayObject):
    pass  # not a display type of the channel: only its placeholder text


class Pretty(TextDisplayObject):
    _sandboxd_placeholder_repr = False

    def __repr__(self):
        return str(self._text())


class Code(TextDisplayObject):
    _sandboxd_placeholder_repr = False

    def __repr__(self):
        return str(self._text())


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kw):
        super().__init__(data, url, filename, metadata)
        if isinstance(self.data, (str, bytes)):
            self.data = json.loads(self.data)

    def _from_file(self, raw):
        return raw

    def _repr_json_(self):
        return self.data


class Image(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None,
                 height=None, retina=False, unconfined=False, metadata=None, alt=None):
        super().__init__(data, url, filename, metadata)
        if format is None and self.filename is not None:
            format = os.path.splitext(self.filename)[1].lstrip(".")
        if format is None and isinstance(self.data, bytes):
            format = next((m.split("/")[1] for m, sig in BINARY_MIMES.items() if self.data.startswith(sig)), None)
        self.format = {"jpg": "jpeg"}.get((format or "png").lower(), (format or "png").lower())
        self.embed = embed if embed is not None else self.url is None
        self.width, self.height, self.alt = width, height, alt

    def _from_file(self, raw):
        return raw

    def _image(self, fmt):
        return self.data if self.embed and self.format == fmt else None

    def _repr_png_(self):
        return self._image("png")

    def _repr_jpeg_(self):
        return self._image("jpeg")

    def _repr_html_(self):
        if self.embed or self.url is None:
            return None
        import html

        return '<img src="%s"/>' % html.escape(self.url)


class IFrame:
    def __init__(self, src, width, height, extras=None, **kwargs):
        self.src, self.width, self.height = src, width, height

    def _repr_html_(self):
        import html

        return '<iframe width="%s" height="%s" src="%s" frameborder="0" allowfullscreen></iframe>' % (
            html.escape(str(self.width)), html.escape(str(self.height)), html.escape(self.src))


SHIM_CLASSES = (DisplayObject, TextDisplayObject, HTML, Markdown, Latex, Math, SVG, Javascript, Pretty, Code,
                JSON, Image, IFrame)
for _cls in SHIM_CLASSES:
    _cls.__module__ = "IPython.core.display"
del _cls


class DisplayHandle:
    """What display(..., display_id=...) returns: update() displays the
    object again (an exec's displays are a list, never updated in place)."""

    def __init__(self, display_fn, display_id=None):
        self._display = display_fn
        self.display_id = display_id or os.urandom(16).hex()

    def display(self, obj, **kwargs):
        self._display(obj, **kwargs)

    def update(self, obj, **kwargs):
        self._display(obj, **kwargs)


def ipython_display_api(display_fn):
    """The names IPython.display exports that code outside a notebook uses:
    the shim's classes, and its functions mapped to the kernel's display."""

    def display(*objs, display_id=None, **kwargs):
        display_fn(*objs, **kwargs)
        if display_id is not None:
            return DisplayHandle(display_fn, None if display_id is True else display_id)
        return None

    def update_display(obj, *, display_id=None, **kwargs):
        display_fn(obj, **kwargs)

    def clear_output(wait=False):
        pass  # a display already sent is part of the exec's result

    def get_ipython():
        return None  # not an IPython shell: libraries fall back to plain output

    def display_as(mime):
        def show(*objs, raw=False, **kwargs):
            for obj in objs:
                display_fn({mime: obj} if raw else obj, raw=raw)

        show.__name__ = "display_" + mime.split("/")[1].split("+")[0]
        return show

    api = {cls.__name__: cls for cls in SHIM_CLASSES}
    api.update(display=display, update_display=update_display, clear_output=clear_output,
               get_ipython=get_ipython, DisplayHandle=DisplayHandle)
    for mime in ("text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml", "application/json"):
        show = display_as(mime)
        api[show.__name__] = show
    return api


class EntrypointError(Exception):
    pass


class ReturnValueError(TypeError):
    pass


def _main():
    mode = os.environ.pop("SANDBOXD_KERNEL_MODE", "kernel")
    if mode not in ("kernel", "once"):
        os.write(2, b"kernel: SANDBOXD_KERNEL_MODE must be kernel or once\n")
        os._exit(2)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    kernel = Kernel(once=(mode == "once"))
    code = kernel.serve()
    # os._exit: no atexit handlers or daemon threads of user code may write
    # on the channel after the last frame.
    os._exit(code)


_main()
