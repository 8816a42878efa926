"""sandboxd: the Python SDK of the sandboxd supervisor.

Run untrusted Python, JavaScript or shell in sandboxd's sandboxes, over the
supervisor's Unix socket or its HTTPS listener, with the standard library
only::

    from sandboxd import Sandbox

    sandbox = Sandbox()                       # $SANDBOXD_SOCKET or the default socket
    print(sandbox.run_code("print(6 * 7)").logs.stdout)

    with Sandbox.session() as s:              # a persistent workspace and kernels
        s.run_code("import matplotlib.pyplot as plt; plt.plot([1, 2, 3])")
        png = s.run_code("plt.plot([3, 1])").results[0].png   # base64
        s.files.write("data.bin", b"\\x00\\x01")
"""

from ._transport import DEFAULT_SOCKET
from .errors import (Conflict, ConnectionFailed, Forbidden, InternalError, InvalidRequest, NotFound,
                     ProtocolError, QuotaExceeded, RateLimited, SandboxdError, Timeout, TooLarge,
                     Unauthenticated, Unavailable)
from .models import (Artifact, EntryInfo, Event, Execution, ExecutionError, Logs, OutputMessage, Result,
                     WriteInfo)
from .sandbox import ExecutionStream, Files, Sandbox, Session

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SOCKET", "Sandbox", "Session", "Files", "ExecutionStream",
    "Execution", "Result", "Logs", "ExecutionError", "OutputMessage", "Event", "Artifact", "EntryInfo",
    "WriteInfo", "SandboxdError", "InvalidRequest", "Unauthenticated", "Forbidden", "NotFound", "Conflict",
    "TooLarge", "QuotaExceeded", "RateLimited", "Unavailable", "InternalError", "ConnectionFailed",
    "ProtocolError", "Timeout",
]
