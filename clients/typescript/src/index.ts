// @sandboxd/client: the TypeScript SDK of the sandboxd supervisor. Runs
// untrusted Python, JavaScript or shell in sandboxd's sandboxes, over the
// supervisor's Unix socket or its HTTPS listener, with Node's own modules
// only (no runtime dependency).

export { Sandbox, Session, Files, ExecutionStream } from "./sandbox.js";
export type { RunCodeOptions, RunCodeCallbacks, SessionOptions, WriteInfo } from "./sandbox.js";
export { Execution, Result, OutputMessage, EntryInfo, groupDisplays, MIME_FIELDS } from "./models.js";
export type { Display, Event, ExecutionError, Logs } from "./models.js";
export { DEFAULT_SOCKET } from "./transport.js";
export type { ConnectionOptions } from "./transport.js";
export {
  SandboxdError, InvalidRequestError, UnauthenticatedError, ForbiddenError, NotFoundError, ConflictError,
  TooLargeError, QuotaExceededError, RateLimitedError, UnavailableError, InternalError, ConnectionFailedError,
  ProtocolError, TimeoutError,
} from "./errors.js";
// The wire types of docs/openapi.yaml (types only; the namespace is empty at run time).
export * as wire from "./openapi.js";
