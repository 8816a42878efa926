// Sandbox, Session and Files: the SDK's surface over the API's exec,
// session and file endpoints (docs/API.md).

import { fstatSync } from "node:fs";
import type { Readable } from "node:stream";

import { ProtocolError, TimeoutError } from "./errors.js";
import { EntryInfo, Execution, OutputMessage, groupDisplays } from "./models.js";
import type { Display, Event, Logs, Result } from "./models.js";
import type * as wire from "./openapi.js";
import { NDJSON, Transport, answerError, quotePath } from "./transport.js";
import type { Body, ConnectionOptions, Response } from "./transport.js";

/** The options of runCode and streamCode. */
export interface RunCodeOptions {
  /** python (default), javascript or shell. */
  language?: wire.ExecRequest["language"];
  /** Wall-clock limit in ms (the supervisor's default when absent). */
  timeoutMs?: number;
  /** Extra environment variables of the payload. */
  env?: Record<string, string>;
  /** Text on the payload's stdin. */
  stdin?: string;
  /** Files staged into the workspace before the run: path to content. */
  files?: Record<string, string | Uint8Array>;
  /** Glob patterns of files to bring back as artifacts. */
  artifacts?: string[];
  network?: wire.ExecRequest["network"];
  environment?: string;
  entrypoint?: string;
  inputs?: Record<string, unknown>;
  /** Session execs only: "kernel" (default for python and javascript) or "process". */
  mode?: wire.ExecRequest["mode"];
  /** Cancels the exec (the connection is closed; the supervisor kills it). */
  signal?: AbortSignal;
}

/** Callbacks that make runCode stream: called as output arrives. */
export interface RunCodeCallbacks {
  onStdout?: (msg: OutputMessage) => unknown;
  onStderr?: (msg: OutputMessage) => unknown;
  /** Called for each display as it arrives (a Result of one representation; the Execution groups them). */
  onResult?: (result: Result) => unknown;
}

function execBody(code: string, o: RunCodeOptions): wire.ExecRequest {
  const body: wire.ExecRequest = { language: o.language ?? "python", code };
  if (o.timeoutMs !== undefined) body.timeout_ms = Math.max(1, Math.ceil(o.timeoutMs));
  if (o.env) body.env = o.env;
  if (o.stdin !== undefined) body.stdin = o.stdin;
  if (o.files) {
    body.files = Object.entries(o.files).map(([path, d]) => ({
      path, content_base64: Buffer.from(typeof d === "string" ? Buffer.from(d, "utf8") : d).toString("base64"),
    }));
  }
  if (o.artifacts) body.artifacts = o.artifacts;
  if (o.network !== undefined) body.network = o.network;
  if (o.environment !== undefined) body.environment = o.environment;
  if (o.entrypoint !== undefined) body.entrypoint = o.entrypoint;
  if (o.inputs !== undefined) body.inputs = o.inputs;
  if (o.mode !== undefined) body.mode = o.mode;
  return body;
}

function timeoutError(e: Execution): TimeoutError {
  const ms = e.raw.policy?.limits?.timeout_ms;
  return new TimeoutError(`the execution ran past its timeout (${ms ? `${ms} ms` : "timeout"})`, e);
}

/**
 * A streamed execution: `for await` over it for its events as they happen
 * (stdout and stderr chunks, displays); `execution` is set once the stream
 * has ended. Breaking out of the loop closes the connection, which
 * cancels the exec. A time-out throws TimeoutError at the end.
 */
export class ExecutionStream implements AsyncIterable<Event> {
  execution?: Execution;
  readonly logs: Logs = { stdout: [], stderr: [] };

  constructor(private readonly resp: Response) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<Event> {
    try {
      yield* this.events();
    } finally {
      this.resp.close();
    }
    if (this.execution?.timedOut) throw timeoutError(this.execution);
  }

  private async *events(): AsyncGenerator<Event> {
    if ((this.resp.header("content-type") ?? "").split(";")[0].trim() !== NDJSON) {
      // A server that does not stream answers with the whole result.
      this.execution = new Execution(await this.resp.json<wire.ExecResult>(200));
      return;
    }
    for await (const line of this.resp.lines()) {
      let ev: { type?: string; data?: unknown } & Record<string, unknown>;
      try {
        ev = JSON.parse(line.toString("utf8"));
      } catch (e) {
        throw new ProtocolError(`a line of the stream is not JSON: ${(e as Error).message}`);
      }
      const { type, ...rest } = ev;
      if (type === "result") {
        this.execution = new Execution(rest as unknown as wire.ExecResult, this.logs);
        return;
      }
      if (type === "error") throw answerError(500, undefined, line);
      if (type === "stdout" || type === "stderr") {
        const text = String(ev.data ?? "");
        this.logs[type].push(text);
        yield { type, text };
      } else if (type === "display") {
        yield { type: "display", display: rest as unknown as Display };
      }
      // Other types (a newer server's) are skipped.
    }
    throw new ProtocolError("the stream ended without a result");
  }

  /** Reads the whole stream, calling the callbacks as events arrive. */
  async wait(cb: RunCodeCallbacks = {}): Promise<Execution> {
    for await (const ev of this) {
      if (ev.type === "stdout") await cb.onStdout?.(new OutputMessage(ev.text, false));
      else if (ev.type === "stderr") await cb.onStderr?.(new OutputMessage(ev.text, true));
      else if (ev.type === "display") await cb.onResult?.(groupDisplays([ev.display])[0]);
    }
    if (!this.execution) throw new ProtocolError("the stream ended without a result");
    return this.execution;
  }
}

/** What one-shot execs and session execs share. */
abstract class Runner {
  protected abstract readonly transport: Transport;
  protected abstract execPath(): string;

  /** Starts an execution streamed as NDJSON; iterate the answer with `for await`. */
  async streamCode(code: string, opts: RunCodeOptions = {}): Promise<ExecutionStream> {
    const resp = await this.transport.request("POST", this.execPath(), {
      json: execBody(code, opts), headers: { Accept: NDJSON }, signal: opts.signal,
    });
    if (resp.status !== 200) throw await resp.error();
    return new ExecutionStream(resp);
  }

  /**
   * Runs code and resolves to its Execution. A failing payload is an
   * Execution with `error`/`exitCode`; a time-out throws TimeoutError; a
   * refusal throws the SandboxdError subclass of its code. With callbacks
   * the execution is streamed.
   */
  async runCode(code: string, opts: RunCodeOptions & RunCodeCallbacks = {}): Promise<Execution> {
    if (opts.onStdout || opts.onStderr || opts.onResult) {
      return (await this.streamCode(code, opts)).wait(opts);
    }
    const resp = await this.transport.request("POST", this.execPath(), { json: execBody(code, opts), signal: opts.signal });
    const execution = new Execution(await resp.json<wire.ExecResult>(200));
    if (execution.timedOut) throw timeoutError(execution);
    return execution;
  }
}

/** The options of a new session. */
export interface SessionOptions {
  /** Idle TTL in seconds (the supervisor's default when absent). */
  ttlSeconds?: number;
  /** Restores the workspace archived under this key, and archives it at the end. */
  key?: string;
  environment?: string;
  network?: wire.SessionCreateRequest["network"];
}

/**
 * A connection to a sandboxd supervisor. `new Sandbox()` uses $SANDBOXD_URL
 * when set, else the socket $SANDBOXD_SOCKET, else the default socket (as
 * sandboxctl does); `new Sandbox({url, apiKey, caFile})` a TCP listener.
 * runCode runs one-shot execs, each in a fresh workspace; session() makes a
 * persistent workspace whose python and javascript run in kernels.
 */
export class Sandbox extends Runner {
  protected readonly transport: Transport;

  constructor(opts: ConnectionOptions = {}) {
    super();
    this.transport = new Transport(opts);
  }

  /** Creates a session on a default Sandbox (or the one given). */
  static session(opts: SessionOptions & { sandbox?: Sandbox } = {}): Promise<Session> {
    return (opts.sandbox ?? new Sandbox()).session(opts);
  }

  protected execPath(): string {
    return "/v1/exec";
  }

  /** The supervisor's readiness (the body of GET /v1/health, also when not ready). */
  async health(): Promise<wire.Health> {
    const resp = await this.transport.request("GET", "/v1/health");
    return resp.json<wire.Health>(resp.status === 503 ? 503 : 200);
  }

  /** Creates a session; call kill() (or use Session.with) to delete it. */
  async session(opts: SessionOptions = {}): Promise<Session> {
    const body: wire.SessionCreateRequest = {};
    if (opts.ttlSeconds !== undefined) body.ttl_seconds = opts.ttlSeconds;
    if (opts.key !== undefined) body.key = opts.key;
    if (opts.environment !== undefined) body.environment = opts.environment;
    if (opts.network !== undefined) body.network = opts.network;
    const resp = await this.transport.request("POST", "/v1/sessions", { json: body });
    return new Session(this.transport, await resp.json<wire.Session>(201));
  }

  /** Runs fn with a new session and deletes the session after it, whatever happens. */
  async withSession<T>(fn: (s: Session) => Promise<T>, opts: SessionOptions = {}): Promise<T> {
    const s = await this.session(opts);
    let result: T;
    try {
      result = await fn(s);
    } catch (e) {
      // The error of fn is the one to see, not one of the clean-up.
      await s.kill().catch(() => undefined);
      throw e;
    }
    await s.kill();
    return result;
  }

  /** The caller's sessions. */
  async listSessions(): Promise<Session[]> {
    const resp = await this.transport.request("GET", "/v1/sessions");
    return (await resp.json<wire.SessionList>(200)).sessions.map((s) => new Session(this.transport, s));
  }

  /** Connects to an existing session (NotFoundError when it is not the caller's). */
  async getSession(id: string): Promise<Session> {
    const resp = await this.transport.request("GET", `/v1/sessions/${quotePath(id)}`);
    return new Session(this.transport, await resp.json<wire.Session>(200));
  }
}

/**
 * A session: a persistent workspace and its kernels. runCode runs in the
 * session's kernel of the language (state is kept; matplotlib figures come
 * back as PNG results); files reads and writes the workspace.
 */
export class Session extends Runner {
  readonly id: string;
  readonly files: Files;
  private readonly path: string;

  constructor(protected readonly transport: Transport, public info: wire.Session) {
    super();
    this.id = info.id;
    this.path = `/v1/sessions/${quotePath(info.id)}`;
    this.files = new Files(transport, this.path);
  }

  protected execPath(): string {
    return `${this.path}/exec`;
  }

  /** Reads the session object again (kernels, disk use, expiry). */
  async refresh(): Promise<wire.Session> {
    this.info = await (await this.transport.request("GET", this.path)).json<wire.Session>(200);
    return this.info;
  }

  /** Stops the session's kernel of language and starts a fresh one. */
  async restartKernel(language: "python" | "javascript" = "python"): Promise<wire.Kernel> {
    const resp = await this.transport.request("POST", `${this.path}/kernels/${quotePath(language)}/restart`);
    return resp.json<wire.Kernel>(200);
  }

  /** Deletes the session (workspace and kernels); one already gone is not an error. */
  async kill(): Promise<void> {
    const resp = await this.transport.request("DELETE", this.path);
    if (resp.status !== 204 && resp.status !== 404) throw await resp.error();
    resp.close();
  }

  /** For `await using s = await sandbox.session()` where the runtime has it. */
  async [(Symbol as { asyncDispose?: symbol }).asyncDispose ?? Symbol.for("Symbol.asyncDispose")](): Promise<void> {
    await this.kill();
  }
}

/** What files.write stored. */
export interface WriteInfo {
  path: string;
  size: number;
  sha256: string;
}

/** A session's workspace from outside; paths are relative to /workspace; symlinks are never followed. */
export class Files {
  private readonly base: string;

  constructor(private readonly transport: Transport, sessionPath: string) {
    this.base = `${sessionPath}/files`;
  }

  /** Stores data (bytes, a string as UTF-8, or a stream, sent chunked) at path, creating parents. */
  async write(path: string, data: string | Uint8Array | Readable | AsyncIterable<Uint8Array>): Promise<WriteInfo> {
    let length: number | undefined;
    const fd = (data as { fd?: unknown }).fd;
    if (typeof fd === "number") {
      try {
        length = fstatSync(fd).size;
      } catch {
        length = undefined;
      }
    }
    const resp = await this.transport.request("PUT", `${this.base}/${quotePath(path)}`, {
      body: data as Body, length, headers: { "Content-Type": "application/octet-stream" },
    });
    const u = await resp.json<wire.Uploaded>(201);
    return { path: u.path, size: u.size, sha256: u.sha256 };
  }

  /** The file at path: "text" (UTF-8, the default), "bytes" (a Buffer) or "stream". */
  read(path: string, opts?: { format?: "text" }): Promise<string>;
  read(path: string, opts: { format: "bytes" }): Promise<Buffer>;
  read(path: string, opts: { format: "stream" }): Promise<AsyncIterable<Buffer>>;
  async read(path: string, opts: { format?: "text" | "bytes" | "stream" } = {}): Promise<string | Buffer | AsyncIterable<Buffer>> {
    const resp = await this.transport.request("GET", `${this.base}/${quotePath(path)}`);
    if (resp.status !== 200) throw await resp.error();
    if (opts.format === "stream") return resp.chunks();
    const data = await resp.bytes(Number.MAX_SAFE_INTEGER);
    const want = resp.header("content-length");
    if (want !== undefined && Number(want) !== data.length) {
      throw new ProtocolError(`GET ${path}: got ${data.length} bytes, the answer announced ${want}`);
    }
    return opts.format === "bytes" ? data : data.toString("utf8");
  }

  /** Every entry below path (the whole workspace by default), at every depth, sorted by path. */
  async list(path = ""): Promise<EntryInfo[]> {
    const resp = await this.transport.request("GET", this.base);
    const files = (await resp.json<wire.FileList>(200)).files;
    const dir = path.replace(/^\/+|\/+$/g, "");
    const prefix = dir ? `${dir}/` : "";
    return files.filter((f) => f.path.startsWith(prefix)).map((f) => new EntryInfo(f));
  }

  /** Whether an entry exists at path. */
  async exists(path: string): Promise<boolean> {
    return (await this.list()).some((e) => e.path === path);
  }

  /** Removes a file, a symlink or an empty directory. */
  async remove(path: string): Promise<void> {
    const resp = await this.transport.request("DELETE", `${this.base}/${quotePath(path)}`);
    if (resp.status !== 204) throw await resp.error();
    resp.close();
  }
}
