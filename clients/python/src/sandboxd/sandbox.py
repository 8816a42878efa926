"""Sandbox, Session and Files: the SDK's surface over the API's exec,
session and file endpoints (docs/API.md)."""

from __future__ import annotations

import base64
import json
import math
import os
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._transport import NDJSON, Body, Response, Transport, answer_error, quote_path
from .errors import ProtocolError, SandboxdError, Timeout
from .models import EntryInfo, Event, Execution, Logs, OnOutput, OnResult, OutputMessage, WriteInfo, group_displays

FileData = Union[bytes, str, BinaryIO]


def _exec_body(code: str, language: str, timeout: Optional[float], env: Optional[Mapping[str, str]],
               extra: Dict[str, Any]) -> Dict[str, Any]:
    """The exec request; timeout in seconds becomes timeout_ms (at least 1)."""
    body: Dict[str, Any] = {"language": language, "code": code}
    if timeout is not None:
        body["timeout_ms"] = max(1, math.ceil(timeout * 1000))
    if env:
        body["env"] = dict(env)
    files = extra.pop("files", None)
    if files:
        body["files"] = [{"path": p, "content_base64": base64.b64encode(_as_bytes(d)).decode()}
                         for p, d in files.items()]
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def _as_bytes(d: Union[bytes, str]) -> bytes:
    return d.encode() if isinstance(d, str) else bytes(d)


class ExecutionStream:
    """A streamed execution: iterate it for its events as they happen
    (stdout and stderr chunks, displays); ``execution`` is set once the
    stream has ended. Use it as a context manager, or exhaust it, so that
    its connection is closed; leaving early cancels the exec.

    A time-out raises :class:`~sandboxd.Timeout` at the end of the stream.
    """

    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self.execution: Optional[Execution] = None
        self.logs = Logs()
        self._displays: List[Dict[str, Any]] = []

    def __enter__(self) -> "ExecutionStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._resp.close()

    def __iter__(self) -> Iterator[Event]:
        try:
            yield from self._events()
        finally:
            self.close()
        if self.execution is not None and self.execution.timed_out:
            raise Timeout(f"the execution ran past its timeout ({_timeout_of(self.execution)})", self.execution)

    def _events(self) -> Iterator[Event]:
        if self._resp.headers.get_content_type() != NDJSON:
            # A server that does not stream answers with the whole result.
            self.execution = Execution(self._resp.json(200))
            return
        for line in self._resp.lines():
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise ProtocolError(f"a line of the stream is not JSON: {e}") from e
            kind = ev.get("type")
            if kind == "result":
                ev.pop("type", None)
                self.execution = Execution(ev, self.logs)
                return
            if kind == "error":
                raise answer_error(500, None, line)
            if kind in ("stdout", "stderr"):
                text = str(ev.get("data", ""))
                (self.logs.stdout if kind == "stdout" else self.logs.stderr).append(text)
                yield Event(kind, text=text)
            elif kind == "display":
                ev.pop("type", None)
                self._displays.append(ev)
                yield Event("display", display=ev)
            # Other types (a newer server's) are skipped.
        raise ProtocolError("the stream ended without a result")

    def wait(self, on_stdout: Optional[OnOutput] = None, on_stderr: Optional[OnOutput] = None,
             on_result: Optional[OnResult] = None) -> Execution:
        """Reads the whole stream, calling the callbacks as events arrive."""
        for ev in self:
            if ev.type == "stdout" and on_stdout:
                on_stdout(OutputMessage(ev.text, False))
            elif ev.type == "stderr" and on_stderr:
                on_stderr(OutputMessage(ev.text, True))
            elif ev.type == "display" and on_result and ev.display is not None:
                on_result(group_displays([ev.display])[0])
        assert self.execution is not None
        return self.execution


def _timeout_of(e: Execution) -> str:
    ms = (e.raw.get("policy") or {}).get("limits", {}).get("timeout_ms")
    return f"{ms} ms" if ms else "timeout"


class _Runner:
    """What one-shot execs and session execs share: run_code and stream_code."""

    _transport: Transport

    def _exec_path(self) -> str:
        raise NotImplementedError

    def stream_code(self, code: str, language: str = "python", *, timeout: Optional[float] = None,
                    env: Optional[Mapping[str, str]] = None, **extra: Any) -> ExecutionStream:
        """Starts an execution streamed as NDJSON; iterate the answer.

        Keyword arguments are those of :meth:`run_code` without callbacks.
        """
        body = _exec_body(code, language, timeout, env, extra)
        resp = self._transport.request("POST", self._exec_path(), json_body=body, headers={"Accept": NDJSON})
        if resp.status != 200:
            try:
                raise resp.error()
            finally:
                resp.close()
        return ExecutionStream(resp)

    def run_code(self, code: str, language: str = "python", *, timeout: Optional[float] = None,
                 env: Optional[Mapping[str, str]] = None, on_stdout: Optional[OnOutput] = None,
                 on_stderr: Optional[OnOutput] = None, on_result: Optional[OnResult] = None,
                 files: Optional[Mapping[str, Union[bytes, str]]] = None, stdin: Optional[str] = None,
                 artifacts: Optional[Sequence[str]] = None, network: Optional[str] = None,
                 environment: Optional[str] = None, entrypoint: Optional[str] = None,
                 inputs: Optional[Mapping[str, Any]] = None, mode: Optional[str] = None) -> Execution:
        """Runs code and returns its :class:`Execution`.

        ``language`` is python, javascript or shell; ``timeout`` is in
        seconds (the supervisor's default when None); ``env`` adds
        variables; ``files`` stages {path: content} into the workspace;
        ``artifacts`` are glob patterns of files to bring back. With
        ``on_stdout``/``on_stderr``/``on_result`` the execution is streamed
        and the callbacks are called as output arrives (``on_result`` once
        per display, each a Result of one representation; the returned
        Execution groups them).

        A failing payload is an Execution with ``error``/``exit_code``; a
        time-out raises :class:`~sandboxd.Timeout`; a refusal raises the
        :class:`~sandboxd.SandboxdError` of its code.
        """
        extra: Dict[str, Any] = {"files": files, "stdin": stdin, "artifacts": list(artifacts) if artifacts else None,
                                 "network": network, "environment": environment, "entrypoint": entrypoint,
                                 "inputs": dict(inputs) if inputs is not None else None, "mode": mode}
        if on_stdout or on_stderr or on_result:
            with self.stream_code(code, language, timeout=timeout, env=env, **extra) as stream:
                return stream.wait(on_stdout, on_stderr, on_result)
        body = _exec_body(code, language, timeout, env, extra)
        resp = self._transport.request("POST", self._exec_path(), json_body=body)
        try:
            execution = Execution(resp.json(200))
        finally:
            resp.close()
        if execution.timed_out:
            raise Timeout(f"the execution ran past its timeout ({_timeout_of(execution)})", execution)
        return execution


def _transport_from_env(socket: Optional[str], url: Optional[str], api_key: Optional[str],
                        ca_file: Optional[str], client_cert: Optional[str], client_key: Optional[str],
                        request_timeout: Optional[float]) -> Transport:
    """As sandboxctl: an explicit socket or url, else $SANDBOXD_URL (with
    $SANDBOXD_API_KEY or $SANDBOXD_API_KEY_FILE, $SANDBOXD_CA_FILE), else
    $SANDBOXD_SOCKET, else the default socket."""
    if url is None and socket is None:
        url = os.environ.get("SANDBOXD_URL") or None
        if url is not None:
            ca_file = ca_file or os.environ.get("SANDBOXD_CA_FILE") or None
            client_cert = client_cert or os.environ.get("SANDBOXD_CLIENT_CERT") or None
            client_key = client_key or os.environ.get("SANDBOXD_CLIENT_KEY") or None
        else:
            socket = os.environ.get("SANDBOXD_SOCKET") or None
    if url is not None and api_key is None:
        api_key = os.environ.get("SANDBOXD_API_KEY") or None
        key_file = os.environ.get("SANDBOXD_API_KEY_FILE")
        if api_key is None and key_file:
            with open(key_file, encoding="utf-8") as f:
                api_key = f.readline().strip()
    return Transport(socket_path=socket, url=url, api_key=api_key, ca_file=ca_file,
                     client_cert=client_cert, client_key=client_key, timeout=request_timeout)


class _SessionFactory:
    """Makes ``Sandbox.session()`` work on the class (a default Sandbox) and
    on an instance."""

    def __get__(self, obj: Optional["Sandbox"], cls: type) -> Callable[..., "Session"]:
        sandbox = obj if obj is not None else None

        def session(ttl: Optional[int] = None, key: Optional[str] = None, environment: Optional[str] = None,
                    network: Optional[str] = None) -> Session:
            """Creates a session (a persistent workspace with kernels); use it
            as a context manager to delete it at the end. ``ttl`` is the idle
            TTL in seconds."""
            sb = sandbox if sandbox is not None else cls()
            return sb._create_session(ttl, key, environment, network)

        return session


class Sandbox(_Runner):
    """A connection to a sandboxd supervisor.

    ``Sandbox()`` uses ``$SANDBOXD_URL`` when set, else the socket
    ``$SANDBOXD_SOCKET``, else ``/run/sandboxd/sandboxd.sock`` (as
    sandboxctl does). ``Sandbox(url="https://host:8443", api_key=...,
    ca_file=...)`` reaches a TCP listener. ``request_timeout`` (seconds)
    bounds each socket operation; None waits as long as the exec may run.

    ``run_code`` runs one-shot execs, each in a fresh workspace;
    ``session()`` makes a persistent workspace whose python and javascript
    code runs in long-lived kernels (state, charts as PNG).
    """

    session = _SessionFactory()

    def __init__(self, socket: Optional[str] = None, *, url: Optional[str] = None, api_key: Optional[str] = None,
                 ca_file: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None, request_timeout: Optional[float] = None) -> None:
        self._transport = _transport_from_env(socket, url, api_key, ca_file, client_cert, client_key,
                                              request_timeout)

    def __repr__(self) -> str:
        return f"Sandbox({self._transport.where!r})"

    def _exec_path(self) -> str:
        return "/v1/exec"

    def _get(self, path: str) -> Any:
        resp = self._transport.request("GET", path)
        try:
            return resp.json(200)
        finally:
            resp.close()

    def health(self) -> Dict[str, Any]:
        """The supervisor's readiness (the body of GET /v1/health, also when not ready)."""
        resp = self._transport.request("GET", "/v1/health")
        try:
            return resp.json(503 if resp.status == 503 else 200)
        finally:
            resp.close()

    def list_sessions(self) -> List["Session"]:
        """The caller's sessions."""
        return [Session(self._transport, s) for s in self._get("/v1/sessions").get("sessions", [])]

    def get_session(self, session_id: str) -> "Session":
        """Connects to an existing session (NotFound when it is not the caller's)."""
        return Session(self._transport, self._get("/v1/sessions/" + quote_path(session_id)))

    def _create_session(self, ttl: Optional[int], key: Optional[str], environment: Optional[str],
                        network: Optional[str]) -> "Session":
        body = {k: v for k, v in (("ttl_seconds", ttl), ("key", key), ("environment", environment),
                                  ("network", network)) if v is not None}
        resp = self._transport.request("POST", "/v1/sessions", json_body=body)
        try:
            return Session(self._transport, resp.json(201))
        finally:
            resp.close()


class Session(_Runner):
    """A session: a persistent workspace and its kernels. ``run_code``
    runs in the session's kernel of the language (state is kept between
    calls; matplotlib figures come back as PNG results). ``files`` reads and
    writes the workspace. As a context manager it deletes the session on
    exit."""

    def __init__(self, transport: Transport, info: Dict[str, Any]) -> None:
        self._transport = transport
        self.info = info
        self.id: str = info["id"]
        self._path = "/v1/sessions/" + quote_path(self.id)
        self.files = Files(transport, self._path)

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.kill()
        except SandboxdError:
            if exc_type is None:
                raise
            # The exception that ended the block is the one to see.

    def _exec_path(self) -> str:
        return self._path + "/exec"

    def refresh(self) -> Dict[str, Any]:
        """Reads the session object again (kernels, disk use, expiry)."""
        resp = self._transport.request("GET", self._path)
        try:
            self.info = resp.json(200)
        finally:
            resp.close()
        return self.info

    def restart_kernel(self, language: str = "python") -> Dict[str, Any]:
        """Stops the session's kernel of language and starts a fresh one."""
        resp = self._transport.request("POST", f"{self._path}/kernels/{quote_path(language)}/restart")
        try:
            return resp.json(200)  # type: ignore[no-any-return]
        finally:
            resp.close()

    def kill(self) -> None:
        """Deletes the session (its workspace and kernels); a session already
        gone is not an error."""
        resp = self._transport.request("DELETE", self._path)
        try:
            if resp.status not in (204, 404):
                raise resp.error()
        finally:
            resp.close()

    close = kill


class Files:
    """A session's workspace, from outside: paths are relative to
    /workspace; symlinks are never followed (docs/API.md, Session files)."""

    def __init__(self, transport: Transport, session_path: str) -> None:
        self._transport = transport
        self._path = session_path + "/files"

    def write(self, path: str, data: FileData) -> WriteInfo:
        """Stores data (bytes, str as UTF-8, or a binary file object, streamed)
        at path, creating parent directories; replaces a regular file."""
        body: Body = data
        length: Optional[int] = None
        if "b" in getattr(data, "mode", "") and hasattr(data, "fileno"):
            # A binary file: its size is known, so the upload is not chunked.
            try:
                length = os.fstat(data.fileno()).st_size - data.tell()  # type: ignore[union-attr]
            except (OSError, ValueError, AttributeError):
                length = None
        resp = self._transport.request("PUT", self._path + "/" + quote_path(path), body,
                                       headers={"Content-Type": "application/octet-stream"}, length=length)
        try:
            w = resp.json(201)
        finally:
            resp.close()
        return WriteInfo(w.get("path", path), int(w.get("size", 0)), w.get("sha256", ""))

    def read(self, path: str, format: str = "text") -> Any:
        """The file at path: ``format`` "text" (UTF-8 str), "bytes", or
        "stream" (an iterator of byte chunks; exhaust it)."""
        if format not in ("text", "bytes", "stream"):
            raise ValueError(f"format {format!r}: want text, bytes or stream")
        resp = self._transport.request("GET", self._path + "/" + quote_path(path))
        if resp.status != 200:
            try:
                raise resp.error()
            finally:
                resp.close()
        if format == "stream":
            return _stream_body(resp)
        try:
            data = b"".join(resp.chunks())
        finally:
            resp.close()
        want = resp.headers.get("Content-Length")
        if want is not None and int(want) != len(data):
            raise ProtocolError(f"GET {path}: got {len(data)} bytes, the answer announced {want}")
        return data.decode("utf-8") if format == "text" else data

    def list(self, path: str = "") -> List[EntryInfo]:
        """Every entry below path (the whole workspace by default), at every
        depth, sorted by path; directories and symlinks included."""
        resp = self._transport.request("GET", self._path)
        try:
            files = resp.json(200).get("files", [])
        finally:
            resp.close()
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        return [EntryInfo(f.get("path", ""), int(f.get("size", 0)), f.get("mode", ""), f.get("modified_at", ""))
                for f in files if f.get("path", "").startswith(prefix)]

    def exists(self, path: str) -> bool:
        """Whether an entry exists at path."""
        return any(e.path == path for e in self.list())

    def remove(self, path: str) -> None:
        """Removes a file, a symlink or an empty directory."""
        resp = self._transport.request("DELETE", self._path + "/" + quote_path(path))
        try:
            if resp.status != 204:
                raise resp.error()
        finally:
            resp.close()


def _stream_body(resp: Response) -> Iterator[bytes]:
    try:
        yield from resp.chunks()
    finally:
        resp.close()
