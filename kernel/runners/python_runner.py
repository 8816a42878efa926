# sandboxd Python kernel runner (docs/KERNELS.md is the reference).
#
# Runs inside the sandbox as the payload program. fd 0 carries requests
# from the supervisor and fd 1 carries frames back; both are moved to
# private close-on-exec descriptors at start, and fd 0/1/2 are replaced so
# that nothing user code does (print, os.write(1, ...), subprocesses) can
# write raw bytes onto the channel. The supervisor trusts nothing written
# here (invariant I12); this program only keeps honest code from
# corrupting the channel by accident.
import ast
import base64
import builtins
import codecs
import inspect
import io
import json
import linecache
import os
import platform
import queue
import signal
import sys
import threading
import traceback
import types

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
        self.chan.send({"type": "ready", "language": "python", "version": platform.python_version()})
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
        self._begin(exec_id, req.get("stdin") or "")
        result = {"type": "result", "id": exec_id, "exit_code": 0, "execution_count": self.count}
        try:
            self._run(req, result)
        except BaseException as e:  # a bug of the runner: report, keep serving
            result["exit_code"] = 1
            result["exception"] = {"type": "KernelError", "message": "runner: %r" % (e,), "traceback": ""}
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
        if code.co_flags & inspect.CO_COROUTINE:
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
        if inspect.isawaitable(value):
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
    def display(self, *objs):
        """The display() builtin: every rich representation the object has
        (PNG, SVG, HTML, JSON), then text/plain unless an image was shown."""
        # No interrupt mid-frame. Only the main thread runs signal handlers,
        # so only its calls need masking.
        on_main = threading.current_thread() is threading.main_thread()
        masked = on_main and self.in_user_code
        if masked:
            self.in_user_code = False
        try:
            for obj in objs:
                for mime, payload in self._bundle(obj):
                    self._send_display(mime, payload)
        finally:
            if masked:
                self._resume_user()

    def _bundle(self, obj):
        out = []
        fig = sys.modules.get("matplotlib.figure")
        if fig is not None and isinstance(obj, fig.Figure):
            return [("image/png", self._figure_png(obj))]
        for mime, meth in (("image/png", "_repr_png_"), ("image/svg+xml", "_repr_svg_"),
                           ("text/html", "_repr_html_"), ("application/json", "_repr_json_")):
            value = self._call_repr(obj, meth)
            if value is None:
                continue
            if mime == "image/png" and isinstance(value, str):
                value = base64.b64decode(value)
            if mime == "application/json" and not isinstance(value, dict):
                continue
            if mime in ("image/svg+xml", "text/html") and not isinstance(value, str):
                continue
            out.append((mime, value))
        if not any(m.startswith("image/") for m, _ in out):
            out.append(("text/plain", repr(obj)))
        return out

    @staticmethod
    def _call_repr(obj, meth):
        if isinstance(obj, type):
            return None  # a class's unbound _repr_html_ is not a representation
        fn = getattr(obj, meth, None)
        if not callable(fn):
            return None
        try:
            return fn()
        except Exception:
            return None

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
        if mime == "image/png":
            frame["data_base64"] = base64.b64encode(payload).decode("ascii")
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

    @staticmethod
    def _figure_png(fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()

    def _show_figures(self):
        """The inline backend's behaviour: every figure still open at the end
        of an exec comes back as a PNG and is closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                self._send_display("image/png", self._figure_png(plt.figure(num)))
        except Exception as e:
            self.stderr.write("figure not rendered: %r\n" % (e,))
        finally:
            plt.close("all")


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
