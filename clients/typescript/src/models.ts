// What the API answers, as objects: executions, results, files. Every
// object keeps the answer it came from (`raw`); nothing is validated
// strictly, so a newer supervisor may add fields.

import type * as wire from "./openapi.js";

/** A display as it comes on the wire; `mime` may be a type newer than this SDK's schema. */
export type Display = Omit<wire.Display, "mime"> & { mime: string };

/** The display MIME types and the Result field each fills. */
export const MIME_FIELDS = {
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
} as const;

type Field = (typeof MIME_FIELDS)[keyof typeof MIME_FIELDS];

// The kernel sends one object's representations in a row (docs/KERNELS.md:
// png, svg, html, json, then text/plain unless an image was sent), so
// text/plain ends an object; a type seen again starts the next one; and
// bitmaps (sent first, with no text/plain after them) are kept apart from
// the other types, so that a chart and a table after it stay two results.
// Nothing depends on the order of the other types, so types the kernel may
// add later group with their object wherever it puts them.
const BITMAPS = new Set(["image/png", "image/jpeg"]);

/** One chunk of stdout or stderr, as it was streamed. */
export class OutputMessage {
  constructor(readonly line: string, readonly error = false) {}
  toString(): string {
    return this.line;
  }
}

/** The output of an execution: chunks as streamed, else each stream whole. */
export interface Logs {
  stdout: string[];
  stderr: string[];
}

/** An uncaught exception: its type, its message and the traceback as printed. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/**
 * One rich output (a chart, a table, the value of the last expression)
 * with each of its representations; `png` and `jpeg` are base64.
 */
export class Result {
  text?: string;
  html?: string;
  markdown?: string;
  latex?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  json?: unknown;
  javascript?: string;
  /** Representations of a MIME type this SDK does not name, by type. */
  readonly extra: Record<string, unknown> = {};
  /** The displays this result was made of. */
  readonly raw: Display[];

  constructor(displays: Display[]) {
    this.raw = [...displays];
    for (const d of displays) {
      const value = d.data_base64 !== undefined ? d.data_base64 : d.data;
      const field = (MIME_FIELDS as Record<string, Field | undefined>)[d.mime];
      if (field === undefined) this.extra[d.mime] = value;
      else (this as Record<Field, unknown>)[field] = value;
    }
  }

  /** The names of the representations present ("png", "text"...). */
  formats(): string[] {
    const present = Object.values(MIME_FIELDS).filter((f) => this[f] !== undefined);
    return [...present, ...Object.keys(this.extra)];
  }

  /** The PNG, decoded. */
  pngBytes(): Buffer | undefined {
    return this.png === undefined ? undefined : Buffer.from(this.png, "base64");
  }

  /** The JPEG, decoded. */
  jpegBytes(): Buffer | undefined {
    return this.jpeg === undefined ? undefined : Buffer.from(this.jpeg, "base64");
  }

  toString(): string {
    return this.text ?? `Result(${this.formats().join(", ")})`;
  }
}

/** Groups the API's displays (one per representation) into one Result per displayed object. */
export function groupDisplays(displays: Display[]): Result[] {
  const groups: Display[][] = [];
  let seen = new Set<string>();
  let closed = true;
  for (const d of displays) {
    const bitmap = BITMAPS.has(d.mime);
    if (closed || seen.has(d.mime) || bitmap !== BITMAPS.has(groups[groups.length - 1][0].mime)) {
      groups.push([]);
      seen = new Set();
    }
    groups[groups.length - 1].push(d);
    seen.add(d.mime);
    closed = d.mime === "text/plain";
  }
  return groups.map((g) => new Result(g));
}

/** The outcome of runCode: output, rich results, the exception, and the API's whole result. */
export class Execution {
  readonly id: string;
  /** The exit status; null when a signal ended the payload. */
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly durationMs: number;
  readonly logs: Logs;
  readonly displays: Display[];
  readonly results: Result[];
  readonly error?: ExecutionError;
  readonly artifacts: wire.Artifact[];
  readonly returnValue?: unknown;
  readonly kernel?: wire.KernelInfo;

  constructor(readonly raw: wire.ExecResult, logs?: Logs) {
    this.id = raw.id;
    this.exitCode = raw.exit_code;
    this.signal = raw.signal;
    this.timedOut = raw.timed_out;
    this.durationMs = raw.duration_ms;
    this.displays = (raw.displays ?? []) as Display[];
    this.results = groupDisplays(this.displays);
    this.artifacts = raw.artifacts ?? [];
    this.returnValue = raw.return_value;
    this.kernel = raw.kernel;
    this.logs = logs ?? { stdout: raw.stdout ? [raw.stdout] : [], stderr: raw.stderr ? [raw.stderr] : [] };
    if (raw.exception) {
      this.error = { name: raw.exception.type, value: raw.exception.message, traceback: raw.exception.traceback };
    }
  }

  /** The whole stdout, as the result carries it (head and tail when cut). */
  get stdout(): string {
    return this.raw.stdout;
  }

  get stderr(): string {
    return this.raw.stderr;
  }

  /** The text of the last result (the value of the last expression). */
  get text(): string | undefined {
    for (let i = this.results.length - 1; i >= 0; i--) {
      if (this.results[i].text !== undefined) return this.results[i].text;
    }
    return undefined;
  }
}

/** One line of a streamed execution. */
export type Event =
  | { type: "stdout" | "stderr"; text: string }
  | { type: "display"; display: Display };

/** One entry of a session's workspace listing. */
export class EntryInfo {
  readonly path: string;
  readonly size: number;
  readonly mode: string;
  readonly modifiedAt: string;

  constructor(raw: wire.FileInfo) {
    this.path = raw.path;
    this.size = raw.size;
    this.mode = raw.mode;
    this.modifiedAt = raw.modified_at;
  }

  get name(): string {
    return this.path.slice(this.path.lastIndexOf("/") + 1);
  }

  /** "file", "dir", "symlink" or "other". */
  get type(): "file" | "dir" | "symlink" | "other" {
    return ({ "-": "file", d: "dir", L: "symlink" } as const)[this.mode[0] as "-" | "d" | "L"] ?? "other";
  }
}
