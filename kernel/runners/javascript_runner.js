// sandboxd JavaScript kernel runner (docs/KERNELS.md is the reference).
//
// Node has no dup2, so this file runs as two processes. The relay (the
// process the sandbox starts) owns the channel: requests on fd 0, frames on
// fd 1. It starts itself again as the evaluator, whose fd 1 and fd 2 are
// pipes the relay turns into stream frames and whose displays and results
// come over node's IPC channel. Caller code runs only in the evaluator, so
// nothing it writes reaches the channel raw, and the relay's event loop is
// never blocked by it: an interrupt is a real SIGINT to the evaluator.
// The supervisor trusts nothing written here (invariant I12).
'use strict';

const fs = require('fs');
const { spawn } = require('child_process');
const { StringDecoder } = require('string_decoder');

const MAX_FRAME_BYTES = 32 * 1024 * 1024;
const STREAM_CHUNK = 256 * 1024; // characters of stream data per frame
const MARK_PREFIX = Buffer.from('\x00\x1bsandboxd-sync-', 'latin1');
const MARK_LEN = MARK_PREFIX.length + 32 + 1; // prefix, 16 random bytes in hex, NUL
const CHILD_FLAG = '--sandboxd-kernel-evaluator';
// Display types the channel carries (kernel/protocol): binary ones with the
// signature the decoder checks, object ones as a plain object, the rest as
// a string.
const BINARY_MIMES = new Map([['image/png', Buffer.from('\x89PNG\r\n\x1a\n', 'latin1')], ['image/jpeg', Buffer.from([0xff, 0xd8, 0xff])]]);
const OBJECT_MIMES = new Set(['application/json', 'application/vnd.plotly.v1+json']);
const MIMES = new Set([...BINARY_MIMES.keys(), ...OBJECT_MIMES, 'image/svg+xml', 'text/html', 'text/markdown', 'text/latex', 'text/plain']);
const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function diag(msg) {
  try { fs.writeSync(2, `kernel: ${String(msg).slice(0, 4000)}\n`); } catch (_) { /* nothing to do */ }
}

// ---------------------------------------------------------------- relay --

function writeAll(fd, buf) {
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // channel full: wait
    }
  }
}

function sendFrame(frame) {
  const line = Buffer.from(JSON.stringify(frame) + '\n', 'utf8');
  if (line.length - 1 > MAX_FRAME_BYTES) return false;
  writeAll(1, line);
  return true;
}

class Pump {
  constructor(relay, name, stream) {
    this.relay = relay;
    this.name = name;
    this.stream = stream;
    this.decoder = new StringDecoder('utf8');
    this.pending = Buffer.alloc(0);
    this.held = [];
    this.seen = new Set();
    this.ended = false;
    stream.on('data', (b) => this.feed(b));
    stream.on('end', () => { this.ended = true; });
  }

  feed(buf) {
    if (this.relay.current === null) {
      this.held.push(buf); // no exec: keep it for the next one, stop reading
      this.stream.pause();
      return;
    }
    if (this.pending.length) buf = Buffer.concat([this.pending, buf]);
    this.pending = Buffer.alloc(0);
    for (;;) {
      const at = buf.indexOf(MARK_PREFIX);
      if (at < 0) break;
      this.emit(buf.subarray(0, at));
      if (buf.length < at + MARK_LEN) {
        this.pending = Buffer.from(buf.subarray(at));
        return;
      }
      this.seen.add(buf.subarray(at, at + MARK_LEN).toString('latin1'));
      buf = buf.subarray(at + MARK_LEN);
      this.relay.drain();
      if (this.relay.current === null) {
        // that marker was the exec's result: the rest is the next exec's
        if (buf.length) this.held.push(Buffer.from(buf));
        this.stream.pause();
        return;
      }
    }
    for (let k = Math.min(MARK_PREFIX.length - 1, buf.length); k > 0; k--) {
      if (MARK_PREFIX.subarray(0, k).equals(buf.subarray(buf.length - k))) {
        this.pending = Buffer.from(buf.subarray(buf.length - k));
        buf = buf.subarray(0, buf.length - k);
        break;
      }
    }
    this.emit(buf);
  }

  emit(buf) {
    const text = this.decoder.write(buf);
    for (let i = 0; i < text.length; i += STREAM_CHUNK) {
      sendFrame({ type: 'stream', id: this.relay.current, name: this.name, data: text.slice(i, i + STREAM_CHUNK) });
    }
  }

  resume() {
    const held = this.held;
    this.held = [];
    for (const b of held) this.feed(b);
    if (this.relay.current !== null) this.stream.resume();
  }

  flushAll() {
    if (this.relay.current === null) return;
    const rest = Buffer.concat([...this.held, this.pending]);
    this.held = [];
    this.pending = Buffer.alloc(0);
    this.emit(stripMarkers(rest));
    const tail = this.decoder.end();
    if (tail) sendFrame({ type: 'stream', id: this.relay.current, name: this.name, data: tail });
  }
}

// stripMarkers is buf without its sync markers, for output that is sent as
// is because the evaluator is gone: a marker, or the start of one cut by
// the evaluator's end, is never caller output.
function stripMarkers(buf) {
  const parts = [];
  for (;;) {
    const at = buf.indexOf(MARK_PREFIX);
    if (at < 0) break;
    parts.push(buf.subarray(0, at));
    buf = buf.subarray(Math.min(buf.length, at + MARK_LEN));
  }
  for (let k = Math.min(MARK_PREFIX.length - 1, buf.length); k > 0; k--) {
    if (MARK_PREFIX.subarray(0, k).equals(buf.subarray(buf.length - k))) {
      buf = buf.subarray(0, buf.length - k);
      break;
    }
  }
  parts.push(buf);
  return Buffer.concat(parts);
}

class Relay {
  constructor(once) {
    this.once = once;
    this.current = null;
    this.count = 0;
    this.queue = []; // evaluator messages waiting for their sync marker
    this.requests = [];
    this.ready = false;
    this.child = spawn(process.execPath, [__filename, CHILD_FLAG], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      cwd: process.cwd(),
      env: process.env,
    });
    this.pumps = [new Pump(this, 'stdout', this.child.stdout), new Pump(this, 'stderr', this.child.stderr)];
    this.child.on('message', (m) => this.onMessage(m));
    this.child.on('exit', (code, signal) => this.onChildExit(code, signal));
    this.child.on('error', (e) => { diag(`evaluator: ${e.message}`); process.exit(70); });
  }

  onMessage(m) {
    if (m === null || typeof m !== 'object') return;
    if (m.type === 'ready') {
      sendFrame({ type: 'ready', language: 'javascript', version: process.version });
      this.ready = true;
      this.next();
      return;
    }
    if ((m.type === 'display' || m.type === 'result') && typeof m.marker === 'string') {
      this.queue.push(m);
      this.drain();
    }
  }

  drain() {
    // Messages wait while no exec runs (a timer's display between execs
    // goes to the next exec, like its output): no frame outside an exec.
    while (this.current !== null && this.queue.length && this.pumps.every((p) => p.seen.has(this.queue[0].marker))) {
      const m = this.queue.shift();
      for (const p of this.pumps) p.seen.delete(m.marker);
      if (m.type === 'display') this.display(m);
      else this.finish(m);
    }
  }

  display(m) {
    const frame = { type: 'display', id: this.current, mime: String(m.mime) };
    if (BINARY_MIMES.has(m.mime)) frame.data_base64 = String(m.data_base64);
    else frame.data = m.data;
    if (!sendFrame(frame)) {
      sendFrame({ type: 'stream', id: this.current, name: 'stderr', data: `display ${frame.mime} dropped: over the ${MAX_FRAME_BYTES}-byte frame limit\n` });
    }
  }

  finish(m) {
    const result = { type: 'result', id: this.current, exit_code: exitStatus(m.exit_code), execution_count: this.count };
    if (m.exception) result.exception = m.exception;
    if ('return_value' in m) result.return_value = m.return_value;
    if (!sendFrame(result)) {
      delete result.return_value;
      result.exit_code = 1;
      result.exception = { type: 'ReturnValueTooLarge', message: `return value over the ${MAX_FRAME_BYTES}-byte frame limit`, traceback: '' };
      sendFrame(result);
    }
    this.current = null;
    if (this.once) this.exit(result.exit_code);
    this.next();
  }

  onRequest(line) {
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      diag(`bad request: ${e.message}`);
      return;
    }
    if (req === null || typeof req !== 'object') return;
    if (req.type === 'interrupt') {
      if (this.current !== null && req.id === this.current) this.child.kill('SIGINT');
    } else if (req.type === 'execute' || req.type === 'shutdown') {
      this.requests.push(req);
      this.next();
    } else {
      diag(`unknown request type ${JSON.stringify(req.type)}`);
    }
  }

  next() {
    if (!this.ready || this.current !== null || !this.requests.length) return;
    const req = this.requests.shift();
    if (req.type === 'shutdown') this.exit(0);
    this.current = String(req.id);
    this.count++;
    for (const p of this.pumps) p.resume();
    this.drain();
    this.child.send({ type: 'execute', code: req.code, entrypoint: req.entrypoint, inputs: req.inputs, stdin: req.stdin, env: req.env });
  }

  onChildExit(code, signal) {
    // The evaluator died (process.reallyExit, a signal, out of memory): its
    // state is gone, so the relay ends too and the supervisor restarts the
    // kernel. An exec in progress gets the process's exit status.
    const status = code !== null ? code : 128 + (require('os').constants.signals[signal] || 0);
    const finish = () => {
      if (this.current !== null) {
        for (const p of this.pumps) p.flushAll();
        sendFrame({ type: 'result', id: this.current, exit_code: status & 0xff, execution_count: this.count });
      }
      this.exit(status & 0xff);
    };
    // Let the pipes drain what the evaluator wrote last: until both end
    // (a fixed wait loses output, or cuts a marker, when the CPU is
    // throttled), or a second if a process the evaluator left holds them.
    const deadline = Date.now() + 1000;
    const poll = () => {
      if (this.pumps.every((p) => p.ended) || Date.now() >= deadline) finish();
      else setTimeout(poll, 10);
    };
    poll();
  }

  exit(code) {
    try { this.child.kill('SIGKILL'); } catch (_) { /* already gone */ }
    process.exit(code);
  }

  start() {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (s) => {
      buf += s;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        this.onRequest(line);
      }
    });
    process.stdin.on('end', () => { this.requests.push({ type: 'shutdown' }); this.next(); });
  }
}

// ------------------------------------------------------------ evaluator --

class ExitSignal {
  constructor(code) { this.code = code; }
}

function exitStatus(code) {
  if (code === undefined || code === null) return 0;
  const n = Number(code);
  return Number.isInteger(n) ? n & 0xff : 1;
}

function interruptedError() {
  const e = new Error('Script execution was interrupted by `SIGINT`');
  e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
  return e;
}

class Evaluator {
  constructor() {
    const repl = require('repl');
    const { PassThrough, Writable } = require('stream');
    this.util = require('util');
    this.vm = require('vm');
    this.repl = repl;
    this.count = 0;
    this.pending = null; // the running eval's promise callbacks
    this.stdinStream = null; // this exec's process.stdin, once read
    this.installStdin();
    this.interrupt = null; // rejects the running exec on SIGINT
    // node's own REPL evaluator: persistent top-level declarations, top-level
    // await (it hoists declarations), SIGINT breaking a synchronous loop.
    this.server = repl.start({
      input: new PassThrough(), output: new Writable({ write(c, e, cb) { cb(); } }),
      prompt: '', terminal: false, useGlobal: false, breakEvalOnSigint: true, preview: false,
    });
    this.server.removeAllListeners('SIGINT');
    this.server._domain.on('error', (e) => this.onDomainError(e));
    this.context = this.server.context;
    this.context.display = (mime, data) => this.display(mime, data);
    // the REPL gives its context a console on the REPL's output stream;
    // caller code logs to the process's stdout and stderr instead
    Object.defineProperty(this.context, 'console', { value: console, writable: true, configurable: true, enumerable: false });
    this.realExit = process.exit.bind(process);
    // process.exit ends the exec, not the kernel. It is replaced on the real
    // process object, so modules the caller requires get it too.
    process.exit = function exit(code) { throw new ExitSignal(code === undefined ? process.exitCode : code); };
    // A SIGINT listener stays installed except while caller code runs
    // synchronously under vm's breakOnSigint: with a listener present,
    // node 20 does not break the script and the signal kills the process.
    this.onSigint = () => { if (this.interrupt) this.interrupt(interruptedError()); };
    process.on('SIGINT', this.onSigint);
    process.on('uncaughtException', (e) => this.background(e));
    process.on('unhandledRejection', (e) => this.background(e));
    process.on('message', (m) => this.onMessage(m));
    process.on('disconnect', () => this.realExit(0));
  }

  background(e) {
    if (e instanceof ExitSignal) return;
    try { process.stderr.write(`Uncaught ${this.util.inspect(e)}\n`); } catch (_) { /* ignore */ }
  }

  onDomainError(e) {
    if (!this.pending) return this.background(e);
    const p = this.pending;
    this.pending = null;
    p.reject(e);
  }

  evalCode(code, filename) {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.breakable(() => this.server.eval(code, this.context, filename, (err, value) => {
        if (!this.pending) return;
        const p = this.pending;
        this.pending = null;
        if (err) p.reject(err instanceof this.repl.Recoverable ? err.err : err);
        else p.resolve(value);
      }));
    });
  }

  // breakable runs fn with the SIGINT listener removed, so that vm's
  // breakOnSigint watchdog can stop a synchronous loop in caller code.
  breakable(fn) {
    process.removeListener('SIGINT', this.onSigint);
    try {
      return fn();
    } finally {
      process.on('SIGINT', this.onSigint);
    }
  }

  // raceInterrupt settles with p or with an interrupt, whichever is first.
  raceInterrupt(p) {
    return Promise.race([p, new Promise((_, reject) => { this.interrupt = reject; })]);
  }

  marker() {
    const m = Buffer.concat([MARK_PREFIX, Buffer.from(require('crypto').randomBytes(16).toString('hex')), Buffer.from([0])]);
    for (const fd of [1, 2]) {
      try { writeAll(fd, m); } catch (_) { /* the caller closed it */ }
    }
    return m.toString('latin1');
  }

  display(mime, data) {
    if (!MIMES.has(mime)) throw new TypeError(`display: mime must be one of ${[...MIMES].join(', ')}`);
    const msg = { type: 'display', mime };
    if (BINARY_MIMES.has(mime)) {
      if (typeof data === 'string') data = Buffer.from(data, 'base64');
      if (!(data instanceof Uint8Array)) throw new TypeError(`display: ${mime} takes a Buffer or a base64 string`);
      const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      const sig = BINARY_MIMES.get(mime);
      if (!buf.subarray(0, sig.length).equals(sig)) throw new TypeError(`display: the data is not ${mime}`);
      msg.data_base64 = buf.toString('base64');
    } else if (OBJECT_MIMES.has(mime)) {
      const text = JSON.stringify(data);
      if (text === undefined || text[0] !== '{') throw new TypeError(`display: ${mime} takes a plain object`);
      msg.data = JSON.parse(text);
    } else {
      if (typeof data !== 'string') throw new TypeError(`display: ${mime} takes a string`);
      msg.data = data;
    }
    msg.marker = this.marker();
    process.send(msg);
  }

  // setStdin makes fd 0 the exec's stdin, as the Python runner's dup2
  // does, so that fs.readFileSync(0), process.stdin and child processes
  // read it. Node has no dup2, but open() returns the lowest free
  // descriptor: with 0 just closed, the file opened next is fd 0. Node
  // cannot make a pipe either, so the data goes through a file in the
  // sandbox's private /tmp, unlinked as soon as it is open.
  setStdin(data) {
    if (this.stdinStream) this.stdinStream.destroy();
    this.stdinStream = null;
    let path = null;
    if (data.length) {
      path = require('path').join(require('os').tmpdir(), `.sandboxd-stdin-${require('crypto').randomBytes(12).toString('hex')}`);
      const w = fs.openSync(path, 'wx', 0o600);
      try { fs.writeFileSync(w, data); } finally { fs.closeSync(w); }
    }
    try {
      try { fs.closeSync(0); } catch (_) { /* the caller closed it */ }
      const fd = fs.openSync(path || '/dev/null', 'r');
      if (fd !== 0) {
        fs.closeSync(fd);
        throw new Error(`the exec's stdin could not be made descriptor 0 (it opened as ${fd})`);
      }
    } finally {
      if (path) fs.unlinkSync(path);
    }
  }

  // installStdin gives every exec a process.stdin of its own: node caches
  // the first one, which would stay at the first exec's end of input.
  installStdin() {
    Object.defineProperty(process, 'stdin', {
      configurable: true, enumerable: true,
      get: () => {
        if (!this.stdinStream) this.stdinStream = fs.createReadStream(null, { fd: 0, autoClose: false });
        return this.stdinStream;
      },
    });
  }

  async onMessage(m) {
    if (!m || m.type !== 'execute') return;
    this.count++;
    const result = { type: 'result', exit_code: 0, execution_count: this.count };
    process.exitCode = undefined;
    const savedEnv = applyEnv(m.env);
    try {
      this.setStdin(Buffer.from(typeof m.stdin === 'string' ? m.stdin : '', 'utf8'));
      const value = await this.raceInterrupt(this.evalCode(staticImportsToDynamic(String(m.code || '')), `exec-${this.count}`));
      if (value !== undefined) this.display('text/plain', this.util.inspect(value));
      if (m.entrypoint) result.return_value = await this.callEntry(String(m.entrypoint), m.inputs);
    } catch (e) {
      this.fail(result, e);
    }
    restoreEnv(savedEnv);
    this.interrupt = null;
    try {
      this.setStdin(Buffer.alloc(0)); // the file's memory is freed; late readers get EOF
    } catch (e) {
      diag(`stdin reset: ${e.message}`);
    }
    if (result.exit_code === 0 && process.exitCode !== undefined) result.exit_code = exitStatus(process.exitCode);
    process.exitCode = undefined;
    result.marker = this.marker();
    process.send(result);
  }

  async callEntry(name, inputs) {
    if (!IDENT.test(name)) throw new TypeError(`entrypoint ${JSON.stringify(name)} is not an identifier`);
    const fn = this.vm.runInContext(`typeof ${name} === 'function' ? ${name} : undefined`, this.context);
    if (fn === undefined) {
      const e = new Error(`the code defines no function ${name} to call`);
      e.name = 'EntrypointError';
      throw e;
    }
    // parse in the context's realm, so that inputs are its own objects
    const parse = this.vm.runInContext('JSON.parse', this.context);
    const args = parse(JSON.stringify(inputs ?? {}));
    // called through a script so that a synchronous loop in it can be interrupted
    Object.defineProperty(this.context, '__sandboxd_call', { value: () => fn(args), configurable: true });
    let ret;
    try {
      ret = this.breakable(() => this.vm.runInContext('__sandboxd_call()', this.context, { breakOnSigint: true }));
    } finally {
      delete this.context.__sandboxd_call;
    }
    const value = await this.raceInterrupt(Promise.resolve(ret));
    let text;
    try {
      text = JSON.stringify(value === undefined ? null : value);
    } catch (e) {
      text = undefined;
    }
    if (text === undefined) {
      const e = new TypeError(`${name}() returned a value that is not JSON-serialisable`);
      e.name = 'ReturnValueError';
      throw e;
    }
    return JSON.parse(text);
  }

  fail(result, e) {
    if (e instanceof ExitSignal) {
      result.exit_code = exitStatus(e.code);
      return;
    }
    result.exit_code = 1;
    const isErr = e !== null && typeof e === 'object' && typeof e.stack === 'string';
    result.exception = {
      type: isErr ? String(e.name || 'Error') : (e?.constructor?.name || typeof e),
      message: isErr ? String(e.message) : this.util.inspect(e),
      traceback: isErr ? e.stack : '',
    };
    try { process.stderr.write(`Uncaught ${isErr ? e.stack : this.util.inspect(e)}\n`); } catch (_) { /* ignore */ }
  }
}

// applyEnv sets an exec's env in process.env (and so for its child
// processes) and returns what restoreEnv needs to undo it: each name's
// previous value, undefined for a name that was unset.
function applyEnv(env) {
  const saved = new Map();
  if (env === null || typeof env !== 'object') return saved;
  for (const [name, value] of Object.entries(env)) {
    // the supervisor's encoder refuses these; skipped rather than failing
    if (typeof value !== 'string' || name === '' || /[=\0]/.test(name) || value.includes('\0')) continue;
    if (!saved.has(name)) saved.set(name, Object.prototype.hasOwnProperty.call(process.env, name) ? process.env[name] : undefined);
    process.env[name] = value;
  }
  return saved;
}

// restoreEnv undoes applyEnv: added names removed, replaced values put back.
function restoreEnv(saved) {
  for (const [name, old] of saved) {
    if (old === undefined) delete process.env[name];
    else process.env[name] = old;
  }
}

// A static import at the start of a line: a default binding, named
// bindings or a namespace, and the module specifier. (The REPL evaluator
// runs scripts, where a static import is a SyntaxError.)
const STATIC_IMPORT = /^([ \t]*)import(?:\s+([\w$]+))?(?:\s*,?\s*(?:\{([^}]*)\}|\*\s*as\s+([\w$]+)))?\s*(?:from\s*)?(['"])([^'"\n]+)\5[ \t]*;?/gm;

// staticImportsToDynamic rewrites each static import into a dynamic one
// bound at top level with var (so that a cell can run again, as in a
// notebook): `import fs, { readFileSync as rf } from 'fs'` becomes
// `var { default: fs, readFileSync: rf } = await import('fs');`. The
// replacement keeps the import's line breaks, so every later line keeps
// its number in stack traces. An import spelled inside a string or
// template literal at the start of a line is rewritten too.
function staticImportsToDynamic(code) {
  if (!code.includes('import')) return code;
  return code.replace(STATIC_IMPORT, (all, indent, def, named, ns, quote, spec) => {
    if (def === 'from' && !named && !ns) def = undefined; // `import from 'm'` is no binding
    const load = `await import(${JSON.stringify(spec)})`;
    let stmt;
    if (ns) {
      stmt = `var ${ns} = ${load};` + (def ? ` var ${def} = ${ns}.default;` : '');
    } else if (def || named !== undefined) {
      const parts = def ? [`default: ${def}`] : [];
      for (const b of (named || '').split(',').map((x) => x.trim()).filter(Boolean)) {
        parts.push(b.replace(/\s+as\s+/, ': '));
      }
      stmt = `var { ${parts.join(', ')} } = ${load};`;
    } else {
      stmt = `${load};`;
    }
    return indent + stmt + '\n'.repeat((all.match(/\n/g) || []).length);
  });
}

function main() {
  if (process.argv[2] === CHILD_FLAG) {
    new Evaluator();
    process.send({ type: 'ready' });
    return;
  }
  const mode = process.env.SANDBOXD_KERNEL_MODE || 'kernel';
  delete process.env.SANDBOXD_KERNEL_MODE;
  if (mode !== 'kernel' && mode !== 'once') {
    diag('SANDBOXD_KERNEL_MODE must be kernel or once');
    process.exit(2);
  }
  new Relay(mode === 'once').start();
}

main();
