// sandboxd warm stub (javascript): the code of a warm pool sandbox. Node
// runs this file as the main module (/run/sandboxd/main.js) like any
// payload; it then blocks on ONE request header on stdin and runs the
// request's code as a cold launch would: compiled as CommonJS in this very
// module (require.main === module, __filename /run/sandboxd/main.js), with
// process.env exactly the base plus the request's. Output is never framed:
// stdout and stderr stay the payload's pipes.
//
// Header: a 4-byte big-endian length, then fields, each a 4-byte
// big-endian length and its bytes: the code, then NAME=value entries of
// the request's env. Exactly the header is read from fd 0 (fs.readSync),
// never more: what follows is the payload's stdin.
'use strict';
(function take() {
  const fs = require('fs');
  function readn(n) {
    const buf = Buffer.alloc(n);
    let off = 0;
    while (off < n) {
      let got;
      try {
        got = fs.readSync(0, buf, off, n - off, null);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
          continue;
        }
        throw e;
      }
      if (got === 0) {
        // EOF before a request: the pool destroyed this sandbox.
        process.reallyExit(0);
      }
      off += got;
    }
    return buf;
  }
  const hdr = readn(readn(4).readUInt32BE(0));
  const fields = [];
  for (let i = 0; i < hdr.length;) {
    const n = hdr.readUInt32BE(i);
    fields.push(hdr.subarray(i + 4, i + 4 + n));
    i += 4 + n;
  }
  const env = Object.assign({}, process.env);
  for (const kv of fields.slice(1)) {
    const s = kv.toString('utf8');
    const eq = s.indexOf('=');
    env[s.slice(0, eq)] = s.slice(eq + 1);
  }
  for (const name of Object.keys(process.env)) delete process.env[name];
  for (const name of Object.keys(env).sort()) process.env[name] = env[name];
  fastExit();
  module._compile(fields[0].toString('utf8'), __filename);
})();

// fastExit ends the process at the end of a natural exit (the event loop
// ran dry) without node's teardown of the environment and the isolate,
// keeping every step the code can observe: 'beforeExit' (which may start
// more work), then the 'exit' listeners (which may set process.exitCode),
// then the exit status. stdout and stderr need no flush: on a pipe or a
// file node writes them synchronously. Only a natural exit with no status
// set is shortened: an uncaught error also emits 'exit' (with exitCode 1)
// before node prints it, and process.exit() already skips the teardown.
function fastExit() {
  const emit = process.emit;
  const reallyExit = process.reallyExit;
  let ranDry = false;
  process.emit = function sandboxdEmit(event, ...args) {
    if (event === 'beforeExit') ranDry = true;
    else if (event !== 'exit') ranDry = false; // more work ran after 'beforeExit'
    const plain = event === 'exit' && ranDry && !process.exitCode;
    const ret = Reflect.apply(emit, this, [event, ...args]);
    if (plain) reallyExit.call(process, process.exitCode || 0);
    return ret;
  };
}
