"""What the API answers, as Python objects: executions, results, files.

The objects keep the answer they came from (``raw``) so that nothing the
supervisor sends is lost, and they never validate strictly: a newer
supervisor may add fields.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

# The display MIME types and the Result attribute each fills. Images come as
# base64 (data_base64); the others as data.
MIME_ATTRS: Dict[str, str] = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "text/latex": "latex",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "application/json": "json",
    "application/javascript": "javascript",
}

# The kernel sends one object's representations in a row (docs/KERNELS.md:
# png, svg, html, json, then text/plain unless an image was sent), so
# text/plain ends an object; a type seen again starts the next one; and
# bitmaps (sent first, with no text/plain after them) are kept apart from
# the other types, so that a chart and a table after it stay two results.
# Nothing depends on the order of the other types, so types the kernel may
# add later group with their object wherever it puts them.
_BITMAPS = ("image/png", "image/jpeg")


@dataclass
class OutputMessage:
    """One chunk of stdout or stderr, as it was streamed."""

    line: str
    error: bool = False  # True for stderr

    def __str__(self) -> str:
        return self.line


@dataclass
class Logs:
    """The output of an execution: the chunks as they came (one per chunk
    when streamed, else the whole stream as one)."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    """An uncaught exception: ``name`` (its type), ``value`` (its message)
    and the ``traceback`` as the runtime printed it."""

    name: str
    value: str
    traceback: str


class Result:
    """One rich output of an execution (a chart, a table, the value of the
    last expression), with each of its representations.

    ``png`` and ``jpeg`` are base64 strings; ``json`` is the decoded object.
    A Jupyter notebook that holds a Result renders it (``_repr_*_``).
    """

    text: Optional[str]
    html: Optional[str]
    markdown: Optional[str]
    latex: Optional[str]
    svg: Optional[str]
    png: Optional[str]
    jpeg: Optional[str]
    pdf: Optional[str]
    json: Optional[Any]
    javascript: Optional[str]

    def __init__(self, displays: List[Dict[str, Any]]) -> None:
        for attr in MIME_ATTRS.values():
            setattr(self, attr, None)
        #: Representations of a MIME type this SDK does not name, by type.
        self.extra: Dict[str, Any] = {}
        #: The display objects of the answer this result was made of.
        self.raw: List[Dict[str, Any]] = list(displays)
        for d in displays:
            mime = str(d.get("mime", ""))
            value = d["data_base64"] if "data_base64" in d else d.get("data")
            attr = MIME_ATTRS.get(mime)
            if attr is None:
                self.extra[mime] = value
            else:
                setattr(self, attr, value)

    def formats(self) -> List[str]:
        """The names of the representations present (``png``, ``text``...)."""
        return [a for a in MIME_ATTRS.values() if getattr(self, a) is not None] + list(self.extra)

    def png_bytes(self) -> Optional[bytes]:
        """The PNG, decoded."""
        return base64.b64decode(self.png) if self.png is not None else None

    def jpeg_bytes(self) -> Optional[bytes]:
        """The JPEG, decoded."""
        return base64.b64decode(self.jpeg) if self.jpeg is not None else None

    def __repr__(self) -> str:
        if self.text is not None:
            return f"Result({self.text!r})"
        return f"Result(formats={self.formats()!r})"

    def __str__(self) -> str:
        return self.text if self.text is not None else repr(self)

    # Jupyter's rich display protocol.
    def _repr_html_(self) -> Optional[str]:
        return self.html

    def _repr_markdown_(self) -> Optional[str]:
        return self.markdown

    def _repr_latex_(self) -> Optional[str]:
        return self.latex

    def _repr_svg_(self) -> Optional[str]:
        return self.svg

    def _repr_png_(self) -> Optional[bytes]:
        return self.png_bytes()

    def _repr_jpeg_(self) -> Optional[bytes]:
        return self.jpeg_bytes()

    def _repr_json_(self) -> Optional[Any]:
        return self.json

    def _repr_javascript_(self) -> Optional[str]:
        return self.javascript

    def _repr_pdf_(self) -> Optional[bytes]:
        return base64.b64decode(self.pdf) if self.pdf is not None else None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
        """Every representation by MIME type (IPython prefers this hook)."""
        out: Dict[str, Any] = {}
        for d in self.raw:
            mime = str(d.get("mime", ""))
            if "data_base64" in d and mime in ("image/png", "image/jpeg"):
                out[mime] = d["data_base64"]  # IPython takes base64 text for images
            elif "data_base64" in d:
                out[mime] = base64.b64decode(d["data_base64"])
            else:
                out[mime] = d.get("data")
        return out


def group_displays(displays: List[Dict[str, Any]]) -> List[Result]:
    """Groups the answer's displays into one Result per displayed object.

    The API sends each representation as its own display; an object's run
    ends at text/plain, at a type seen again, or where bitmaps and other
    types meet.
    """
    groups: List[List[Dict[str, Any]]] = []
    seen: set = set()
    closed = True
    for d in displays:
        mime = str(d.get("mime", ""))
        bitmap = mime in _BITMAPS
        if closed or mime in seen or (bitmap != (groups[-1][0].get("mime") in _BITMAPS)):
            groups.append([])
            seen = set()
        groups[-1].append(d)
        seen.add(mime)
        closed = mime == "text/plain"
    return [Result(g) for g in groups]


@dataclass
class Artifact:
    """A file collected from the workspace after the run."""

    path: str
    size: int
    sha256: str
    content_base64: str

    @property
    def content(self) -> bytes:
        return base64.b64decode(self.content_base64)


class Execution:
    """The outcome of ``run_code``: output, rich results, the exception.

    Attributes mirror the API's result: ``exit_code`` (None when a signal
    ended it), ``signal``, ``timed_out``, ``id`` (the audit trail's exec id),
    ``duration_ms``, ``artifacts``, ``return_value``, ``kernel``; ``raw`` is
    the whole result object.
    """

    def __init__(self, raw: Dict[str, Any], logs: Optional[Logs] = None) -> None:
        self.raw = raw
        self.id: str = raw.get("id", "")
        self.exit_code: Optional[int] = raw.get("exit_code")
        self.signal: Optional[str] = raw.get("signal")
        self.timed_out: bool = bool(raw.get("timed_out"))
        self.oom_killed: bool = bool(raw.get("oom_killed"))
        self.quota_exceeded: bool = bool(raw.get("quota_exceeded"))
        self.duration_ms: int = int(raw.get("duration_ms") or 0)
        self.kernel: Optional[Dict[str, Any]] = raw.get("kernel")
        self.return_value: Any = raw.get("return_value")
        self.displays: List[Dict[str, Any]] = list(raw.get("displays") or [])
        self.results: List[Result] = group_displays(self.displays)
        self.artifacts: List[Artifact] = [
            Artifact(a.get("path", ""), int(a.get("size", 0)), a.get("sha256", ""), a.get("content_base64", ""))
            for a in raw.get("artifacts") or []
        ]
        if logs is None:
            logs = Logs([raw["stdout"]] if raw.get("stdout") else [], [raw["stderr"]] if raw.get("stderr") else [])
        self.logs = logs
        exc = raw.get("exception")
        self.error: Optional[ExecutionError] = (
            ExecutionError(exc.get("type", ""), exc.get("message", ""), exc.get("traceback", "")) if exc else None
        )

    @property
    def stdout(self) -> str:
        """The whole stdout, as the result carries it (head and tail when cut)."""
        return str(self.raw.get("stdout", ""))

    @property
    def stderr(self) -> str:
        """The whole stderr, as the result carries it."""
        return str(self.raw.get("stderr", ""))

    @property
    def text(self) -> Optional[str]:
        """The text of the last result (the value of the last expression)."""
        for r in reversed(self.results):
            if r.text is not None:
                return r.text
        return None

    def to_json(self) -> str:
        return json.dumps(self.raw)

    def __repr__(self) -> str:
        return (f"Execution(exit_code={self.exit_code!r}, results={self.results!r}, "
                f"error={self.error!r}, timed_out={self.timed_out!r})")


@dataclass
class Event:
    """One line of a streamed execution: ``type`` is ``stdout``, ``stderr``
    or ``display`` (``text`` for output, ``display`` for a display)."""

    type: str
    text: str = ""
    display: Optional[Dict[str, Any]] = None


@dataclass
class EntryInfo:
    """One entry of a session's workspace listing."""

    path: str
    size: int
    mode: str
    modified_at: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def type(self) -> str:
        """``file``, ``dir``, ``symlink`` or ``other``."""
        m = self.mode[:1]
        return {"-": "file", "d": "dir", "L": "symlink"}.get(m, "other")


@dataclass
class WriteInfo:
    """What an upload stored: its path, size and SHA-256 (hex)."""

    path: str
    size: int
    sha256: str


OnOutput = Callable[[OutputMessage], Any]
OnResult = Callable[[Result], Any]
Events = Iterator[Event]
