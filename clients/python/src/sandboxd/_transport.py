"""HTTP/1.1 to the supervisor: over its Unix socket, or over TCP (HTTP or
HTTPS) with a bearer API key. It owns turning answers into exceptions; it
never retries (a POST that failed halfway may have run) and never takes a
proxy from the environment (the key goes to the supervisor only).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any, BinaryIO, Dict, Iterator, Optional, Union
from urllib.parse import quote, urlsplit

from .errors import ConnectionFailed, ProtocolError, SandboxdError, error_for

#: The supervisor's default socket (docs/API.md), as sandboxctl uses it.
DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock"

# Bounds of what is read into memory: a whole answer (outputs, artifacts of
# 50 MiB base64-encoded, room to spare) and one line of a stream.
MAX_ANSWER_BYTES = 256 << 20
NDJSON = "application/x-ndjson"

Body = Union[bytes, str, BinaryIO, None]


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection whose socket is a Unix domain socket."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Response:
    """An answer whose body has not been read yet; close() frees the connection."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, what: str) -> None:
        self._conn = conn
        self._resp = resp
        self.what = what
        self.status = resp.status
        self.headers = resp.headers

    def read(self, limit: int = MAX_ANSWER_BYTES) -> bytes:
        try:
            data = self._resp.read(limit + 1)
        except (OSError, http.client.HTTPException) as e:
            raise ProtocolError(f"read the answer of {self.what}: {e}") from e
        if len(data) > limit:
            raise ProtocolError(f"the answer of {self.what} is larger than {limit} bytes")
        return data

    def lines(self) -> Iterator[bytes]:
        """The body's lines (NDJSON), each without its newline."""
        while True:
            try:
                line = self._resp.readline(MAX_ANSWER_BYTES + 1)
            except (OSError, http.client.HTTPException) as e:
                raise ProtocolError(f"read the stream of {self.what}: {e}") from e
            if not line:
                return
            if len(line) > MAX_ANSWER_BYTES:
                raise ProtocolError(f"a line of the stream of {self.what} is larger than {MAX_ANSWER_BYTES} bytes")
            yield line.rstrip(b"\n")

    def chunks(self, size: int = 1 << 16) -> Iterator[bytes]:
        while True:
            try:
                b = self._resp.read(size)
            except (OSError, http.client.HTTPException) as e:
                raise ProtocolError(f"read the answer of {self.what}: {e}") from e
            if not b:
                return
            yield b

    def error(self) -> SandboxdError:
        """The exception for a non-2xx answer (reads the body)."""
        body = self.read(1 << 20)
        return answer_error(self.status, self.headers.get("Retry-After"), body)

    def json(self, want: int) -> Any:
        """Checks the status and decodes the JSON body."""
        if self.status != want:
            raise self.error()
        body = self.read()
        try:
            return json.loads(body)
        except ValueError as e:
            raise ProtocolError(f"the answer of {self.what} is not JSON: {e}") from e

    def close(self) -> None:
        self._resp.close()
        self._conn.close()


def answer_error(status: int, retry_after: Optional[str], body: bytes) -> SandboxdError:
    """The exception for an error answer: the API's body, or else a ProtocolError."""
    try:
        err = json.loads(body)["error"]
        code, message = err["code"], err["message"]
        if not isinstance(code, str) or not code or not isinstance(message, str):
            raise ValueError("not the API's error body")
    except (ValueError, KeyError, TypeError):
        snippet = body[:200].decode("utf-8", "replace").strip()
        return ProtocolError(f"unexpected answer: HTTP {status}: {snippet!r}", status=status)
    return error_for(status, code, message, retry_after)


class Transport:
    """Where and how to reach one supervisor. Each request opens its own
    connection, so a Transport may be shared between threads."""

    def __init__(self, *, socket_path: Optional[str] = None, url: Optional[str] = None,
                 api_key: Optional[str] = None, ca_file: Optional[str] = None,
                 client_cert: Optional[str] = None, client_key: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self.timeout = timeout
        self._api_key = api_key or ""
        if "\r" in self._api_key or "\n" in self._api_key:
            raise ValueError("the API key contains a line break")
        self._ssl: Optional[ssl.SSLContext] = None
        if url is None:
            self.socket_path = socket_path or DEFAULT_SOCKET
            self.where = self.socket_path
            self._host, self._port, self._scheme, self._host_header = "", 0, "unix", "localhost"
            if ca_file or client_cert:
                raise ValueError("ca_file and client_cert need a url (the socket needs no TLS)")
            return
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname or u.path not in ("", "/") or u.query or u.username:
            raise ValueError(f"sandboxd URL {url!r}: want http://HOST:PORT or https://HOST:PORT")
        self.socket_path = ""
        self.where = f"{u.scheme}://{u.netloc}"
        self._scheme, self._host, self._host_header = u.scheme, u.hostname, u.netloc
        self._port = u.port or (443 if u.scheme == "https" else 80)
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca_file)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            if client_cert:
                ctx.load_cert_chain(client_cert, client_key)
            self._ssl = ctx
        elif ca_file or client_cert:
            raise ValueError(f"sandboxd URL {url!r} is not https, but a CA file or client certificate was given")

    def _connect(self) -> http.client.HTTPConnection:
        if self._scheme == "unix":
            return _UnixConnection(self.socket_path, self.timeout)
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def request(self, method: str, path: str, body: Body = None, *, json_body: Any = None,
                headers: Optional[Dict[str, str]] = None, length: Optional[int] = None) -> Response:
        """Sends one request and returns the answer, its body unread."""
        hdrs = {"Host": self._host_header}
        if self._api_key:
            hdrs["Authorization"] = "Bearer " + self._api_key
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        if isinstance(body, str):
            body = body.encode()
        chunked = False
        if isinstance(body, (bytes, bytearray)):
            hdrs["Content-Length"] = str(len(body))
        elif body is not None:
            if length is not None:
                hdrs["Content-Length"] = str(length)
            else:
                chunked = True
                hdrs["Transfer-Encoding"] = "chunked"
        elif method in ("POST", "PUT"):
            hdrs["Content-Length"] = "0"
            if method == "POST":
                # A TCP listener refuses a POST not declared JSON, even an
                # empty one (a web page could send it without a preflight).
                hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        what = f"{method} {path}"
        conn = self._connect()
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in hdrs.items():
                conn.putheader(k, v)
            conn.endheaders()
            if body is not None:
                _send_body(conn, body, chunked)
            resp = conn.getresponse()
        except ssl.SSLError as e:
            conn.close()
            raise ConnectionFailed(f"{what} via {self.where}: TLS: {e}") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed(f"{what} via {self.where}: {e}") from e
        return Response(conn, resp, what)


def _send_body(conn: http.client.HTTPConnection, body: Any, chunked: bool) -> None:
    if isinstance(body, (bytes, bytearray)):
        conn.send(bytes(body))
        return
    while True:
        block = body.read(1 << 16)
        if isinstance(block, str):
            block = block.encode()
        if not block:
            break
        conn.send(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
    if chunked:
        conn.send(b"0\r\n\r\n")


def quote_path(p: str) -> str:
    """Percent-encodes each segment of a workspace path, keeping the slashes."""
    return "/".join(quote(seg, safe="") for seg in p.split("/"))
