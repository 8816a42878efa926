// Errors of the sandboxd SDK. An API refusal (a non-2xx answer with the
// API's error body) becomes the subclass its code names; an unreachable
// supervisor is ConnectionFailedError; an answer that is not the API's is
// ProtocolError. A failing payload is not an error: it is an Execution
// with `error` set. A time-out is TimeoutError, which carries the execution.

import type { ErrorCode } from "./openapi.js";
import type { Execution } from "./models.js";

/** The base class of every error the SDK throws. */
export class SandboxdError extends Error {
  /** The API's error code; undefined when the error did not come from the API. */
  readonly code?: ErrorCode | "timeout";
  /** The HTTP status of the answer, when there was one. */
  readonly status?: number;

  constructor(message: string, opts: { status?: number; code?: ErrorCode | "timeout"; cause?: unknown } = {}) {
    super(opts.code ? `${opts.code}: ${message}` : message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = opts.status;
    this.code = opts.code;
  }
}

/** 400 (or 405) invalid_argument: the request breaks a rule of the API. */
export class InvalidRequestError extends SandboxdError {}
/** 401 unauthenticated: a missing or wrong API key (TCP listeners only). */
export class UnauthenticatedError extends SandboxdError {}
/** 403 forbidden: the caller may not do this, or a path escapes the workspace. */
export class ForbiddenError extends SandboxdError {}
/** 404 not_found: no such session or file (or another caller's). */
export class NotFoundError extends SandboxdError {}
/** 409 conflict: the session is being deleted or still busy. */
export class ConflictError extends SandboxdError {}
/** 413 too_large: the body, code or upload is above a limit. */
export class TooLargeError extends SandboxdError {}
/** 507 quota_exceeded: the workspace quota (or the disk) is full. */
export class QuotaExceededError extends SandboxdError {}
/** 503 unavailable: the host cannot sandbox right now (the message says the fix). */
export class UnavailableError extends SandboxdError {}
/** 500 internal: a bug in the supervisor (see its log). */
export class InternalError extends SandboxdError {}
/** The supervisor could not be reached (socket missing, refused, TLS failure...). */
export class ConnectionFailedError extends SandboxdError {}
/** The answer was not the API's (a proxy, a broken stream, bad JSON). */
export class ProtocolError extends SandboxdError {}

/** 429 limit_exceeded: no exec slot, or too many sessions; retry after `retryAfter` seconds. */
export class RateLimitedError extends SandboxdError {
  /** Seconds to wait before retrying, from the Retry-After header. */
  readonly retryAfter?: number;

  constructor(message: string, opts: { status?: number; code?: ErrorCode; retryAfter?: number } = {}) {
    super(message, opts);
    this.retryAfter = opts.retryAfter;
  }
}

/** The code ran past its timeout and was killed; `execution` holds what it produced. */
export class TimeoutError extends SandboxdError {
  readonly execution: Execution;

  constructor(message: string, execution: Execution) {
    super(message, { code: "timeout" });
    this.execution = execution;
  }
}

const byCode: Record<ErrorCode, new (message: string, opts: { status?: number; code?: ErrorCode }) => SandboxdError> = {
  invalid_argument: InvalidRequestError,
  unauthenticated: UnauthenticatedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  too_large: TooLargeError,
  quota_exceeded: QuotaExceededError,
  limit_exceeded: RateLimitedError,
  unavailable: UnavailableError,
  internal: InternalError,
};

/** The error for an API error body; an unknown code is a plain SandboxdError. */
export function errorFor(status: number, code: string, message: string, retryAfter?: string | null): SandboxdError {
  if (code === "limit_exceeded") {
    const n = retryAfter == null ? NaN : Number(retryAfter.trim());
    return new RateLimitedError(message, { status, code, retryAfter: Number.isFinite(n) ? n : undefined });
  }
  const cls = (byCode as Record<string, (typeof byCode)[ErrorCode] | undefined>)[code] ?? SandboxdError;
  return new cls(message, { status, code: code as ErrorCode });
}
