// HTTP/1.1 to the supervisor: over its Unix socket, or over TCP (HTTP or
// HTTPS) with a bearer API key, through Node's own http/https modules. It
// owns turning answers into errors; it never retries (a POST that failed
// halfway may have run) and never uses a proxy from the environment (the
// key goes to the supervisor only).

import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import type { Readable } from "node:stream";

import { ConnectionFailedError, ProtocolError, SandboxdError, errorFor } from "./errors.js";

/** The supervisor's default socket (docs/API.md), as sandboxctl uses it. */
export const DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock";
/** Bound of an answer read into memory, and of one line of a stream. */
export const MAX_ANSWER_BYTES = 256 << 20;
export const NDJSON = "application/x-ndjson";

/** How to reach a supervisor. */
export interface ConnectionOptions {
  /** The Unix socket (default: $SANDBOXD_SOCKET, else /run/sandboxd/sandboxd.sock). */
  socketPath?: string;
  /** http://HOST:PORT or https://HOST:PORT of a TCP listener (default: $SANDBOXD_URL). */
  url?: string;
  /** The API key sent as a bearer token (default: $SANDBOXD_API_KEY). */
  apiKey?: string;
  /** A PEM file of the CA that signed the server's certificate (default: $SANDBOXD_CA_FILE). */
  caFile?: string;
  /** A client certificate and key (PEM files), for a listener that requires one. */
  clientCert?: string;
  clientKey?: string;
  /** Milliseconds a request may stay idle on its socket; none by default. */
  requestTimeoutMs?: number;
}

export type Body = string | Uint8Array | Readable | AsyncIterable<Uint8Array> | undefined;

/** An answer whose body has not been read yet. */
export class Response {
  constructor(readonly status: number, readonly headers: http.IncomingHttpHeaders, private readonly msg: http.IncomingMessage, readonly what: string) {}

  header(name: string): string | undefined {
    const v = this.headers[name.toLowerCase()];
    return Array.isArray(v) ? v[0] : v;
  }

  async bytes(limit = MAX_ANSWER_BYTES): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let n = 0;
    try {
      for await (const c of this.msg) {
        n += (c as Buffer).length;
        if (n > limit) throw new ProtocolError(`the answer of ${this.what} is larger than ${limit} bytes`);
        chunks.push(c as Buffer);
      }
    } catch (e) {
      this.close();
      if (e instanceof SandboxdError) throw e;
      throw new ProtocolError(`read the answer of ${this.what}: ${(e as Error).message}`, { cause: e });
    }
    return Buffer.concat(chunks);
  }

  /** The body's lines (NDJSON), each without its newline. */
  async *lines(): AsyncGenerator<Buffer> {
    let pending: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of this.msg) {
        let c = chunk as Buffer;
        for (let i = c.indexOf(10); i >= 0; i = c.indexOf(10)) {
          const line = Buffer.concat([...pending, c.subarray(0, i)]);
          pending = [];
          size = 0;
          c = c.subarray(i + 1);
          yield line;
        }
        size += c.length;
        if (size > MAX_ANSWER_BYTES) throw new ProtocolError(`a line of the stream of ${this.what} is larger than ${MAX_ANSWER_BYTES} bytes`);
        if (c.length > 0) pending.push(c);
      }
    } catch (e) {
      if (e instanceof SandboxdError) throw e;
      throw new ProtocolError(`read the stream of ${this.what}: ${(e as Error).message}`, { cause: e });
    }
    if (size > 0) yield Buffer.concat(pending);
  }

  /** The body as it arrives. */
  chunks(): AsyncIterable<Buffer> {
    return this.msg as AsyncIterable<Buffer>;
  }

  /** The error for a non-2xx answer (reads the body). */
  async error(): Promise<SandboxdError> {
    return answerError(this.status, this.header("retry-after"), await this.bytes(1 << 20));
  }

  /** Checks the status and decodes the JSON body. */
  async json<T>(want: number): Promise<T> {
    if (this.status !== want) throw await this.error();
    const body = await this.bytes();
    try {
      return JSON.parse(body.toString("utf8")) as T;
    } catch (e) {
      throw new ProtocolError(`the answer of ${this.what} is not JSON: ${(e as Error).message}`);
    }
  }

  close(): void {
    this.msg.destroy();
  }
}

/** The error for an error answer: the API's body, or else a ProtocolError. */
export function answerError(status: number, retryAfter: string | undefined | null, body: Buffer): SandboxdError {
  try {
    const e = (JSON.parse(body.toString("utf8")) as { error?: { code?: unknown; message?: unknown } }).error;
    if (e && typeof e.code === "string" && e.code !== "" && typeof e.message === "string") {
      return errorFor(status, e.code, e.message, retryAfter);
    }
  } catch {
    // not JSON: below
  }
  const snippet = body.subarray(0, 200).toString("utf8").trim();
  return new ProtocolError(`unexpected answer: HTTP ${status}: ${JSON.stringify(snippet)}`, { status });
}

/** Where and how to reach one supervisor; each request opens its own connection. */
export class Transport {
  readonly where: string;
  // True private fields: the key and a client key's PEM never show in
  // util.inspect or console.log of a Sandbox.
  readonly #base: http.RequestOptions;
  readonly #mod: typeof http | typeof https;
  readonly #apiKey: string;
  readonly #timeoutMs?: number;

  constructor(opts: ConnectionOptions = {}) {
    const env = process.env;
    let { url, socketPath, apiKey, caFile, clientCert, clientKey } = opts;
    if (url === undefined && socketPath === undefined) {
      url = env.SANDBOXD_URL || undefined;
      if (url === undefined) socketPath = env.SANDBOXD_SOCKET || undefined;
      else {
        caFile ??= env.SANDBOXD_CA_FILE || undefined;
        clientCert ??= env.SANDBOXD_CLIENT_CERT || undefined;
        clientKey ??= env.SANDBOXD_CLIENT_KEY || undefined;
      }
    }
    if (url !== undefined && apiKey === undefined) {
      apiKey = env.SANDBOXD_API_KEY || undefined;
      if (apiKey === undefined && env.SANDBOXD_API_KEY_FILE) {
        apiKey = readFileSync(env.SANDBOXD_API_KEY_FILE, "utf8").split("\n")[0].trim();
      }
    }
    this.#apiKey = apiKey ?? "";
    if (/[\r\n]/.test(this.#apiKey)) throw new Error("the API key contains a line break");
    this.#timeoutMs = opts.requestTimeoutMs;
    if (url === undefined) {
      if (caFile || clientCert) throw new Error("caFile and clientCert need a url (the socket needs no TLS)");
      const path = socketPath ?? DEFAULT_SOCKET;
      this.where = path;
      this.#mod = http;
      this.#base = { socketPath: path, host: "localhost", agent: false };
      return;
    }
    const u = new URL(url);
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname || (u.pathname !== "/" && u.pathname !== "") || u.search || u.username) {
      throw new Error(`sandboxd URL ${JSON.stringify(url)}: want http://HOST:PORT or https://HOST:PORT`);
    }
    this.where = `${u.protocol}//${u.host}`;
    const host = u.hostname.replace(/^\[|\]$/g, "");
    if (u.protocol === "https:") {
      this.#mod = https;
      this.#base = {
        host, port: u.port || 443, agent: false, minVersion: "TLSv1.2",
        ca: caFile ? readFileSync(caFile) : undefined,
        cert: clientCert ? readFileSync(clientCert) : undefined,
        key: clientKey ? readFileSync(clientKey) : undefined,
      } as https.RequestOptions;
    } else {
      if (caFile || clientCert) throw new Error(`sandboxd URL ${JSON.stringify(url)} is not https, but a CA file or client certificate was given`);
      this.#mod = http;
      this.#base = { host, port: u.port || 80, agent: false };
    }
  }

  /** Sends one request and resolves to the answer, its body unread. */
  request(method: string, path: string, opts: { body?: Body; json?: unknown; headers?: Record<string, string>; length?: number; signal?: AbortSignal } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...opts.headers };
    if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["Content-Type"] = "application/json";
    }
    if (typeof body === "string") body = Buffer.from(body, "utf8");
    if (body instanceof Uint8Array) headers["Content-Length"] = String(body.length);
    else if (body !== undefined && opts.length !== undefined) headers["Content-Length"] = String(opts.length);
    else if (body === undefined && (method === "POST" || method === "PUT")) headers["Content-Length"] = "0";
    // A TCP listener refuses a POST not declared JSON, even an empty one (a
    // web page could send it without a preflight).
    if (body === undefined && method === "POST") headers["Content-Type"] ??= "application/json";
    const what = `${method} ${path}`;
    return new Promise((resolve, reject) => {
      const fail = (e: Error) => reject(e instanceof SandboxdError ? e : new ConnectionFailedError(`${what} via ${this.where}: ${e.message}`, { cause: e }));
      const req = this.#mod.request({ ...this.#base, method, path, headers, signal: opts.signal, timeout: this.#timeoutMs }, (msg) => {
        resolve(new Response(msg.statusCode ?? 0, msg.headers, msg, what));
      });
      req.on("error", fail);
      req.on("timeout", () => req.destroy(new Error(`no answer within ${this.#timeoutMs} ms`)));
      if (body === undefined) req.end();
      else if (body instanceof Uint8Array) req.end(body);
      else void pump(body, req).catch((e: Error) => req.destroy(e));
    });
  }
}

async function pump(src: AsyncIterable<Uint8Array>, req: http.ClientRequest): Promise<void> {
  for await (const chunk of src) {
    const c = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    if (!req.write(c)) await new Promise((r) => req.once("drain", r));
  }
  req.end();
}

/** Percent-encodes each segment of a workspace path, keeping the slashes. */
export function quotePath(p: string): string {
  return p.split("/").map(encodeURIComponent).join("/");
}
