// sandboxd egress: Node's built-in fetch (undici) reads no proxy variable
// before Node 24, so in an egress sandbox it would find no way out. This
// module, loaded with --import before the program, installs a global
// dispatcher that sends fetch through the relay the proxy variables name:
// https:// in a CONNECT tunnel (TLS end to end; the proxy checks the SNI),
// http:// as an absolute-form request, one per connection. It uses only
// Node's own bundled undici, reached through the global dispatcher slot
// undici itself defines. Loaded only for network "egress" execs.
import net from 'node:net';
import tls from 'node:tls';

const major = Number(process.versions.node.split('.')[0]);
const proxyURL = process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy;
const slot = Symbol.for('undici.globalDispatcher.1');

function install() {
  // A data: URL is answered without a connection; the call loads the
  // bundled undici, which puts its Agent in the slot.
  globalThis.fetch('data:,').catch(() => {});
  const base = globalThis[slot];
  if (!base || typeof base.dispatch !== 'function') return;
  const Agent = base.constructor;
  const proxy = new URL(proxyURL);
  const proxyPort = Number(proxy.port) || 80;

  const toProxy = (opts, cb) => {
    const s = net.connect(proxyPort, proxy.hostname);
    s.once('error', cb);
    s.once('connect', () => { s.removeListener('error', cb); cb(null, s); });
  };

  const tunnel = (opts, cb) => {
    let done = false;
    const finish = (err, sock) => { if (!done) { done = true; cb(err, sock); } };
    const s = net.connect(proxyPort, proxy.hostname);
    const fail = (err) => { s.destroy(); finish(err); };
    s.once('error', fail);
    const port = opts.port || 443;
    s.once('connect', () => s.write(`CONNECT ${opts.hostname}:${port} HTTP/1.1\r\nHost: ${opts.hostname}:${port}\r\n\r\n`));
    let head = Buffer.alloc(0);
    const onData = (d) => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16384) fail(new Error('sandboxd egress proxy: answer head too long'));
        return;
      }
      s.removeListener('data', onData);
      s.pause();
      const text = head.toString('utf8');
      if (!/^HTTP\/1\.[01] 200/.test(text)) {
        // The proxy's 403 body says why (the allowlist, the address).
        fail(new Error(text.slice(end + 4).trim() || text.split('\r\n')[0]));
        return;
      }
      const t = tls.connect({ socket: s, servername: opts.servername || opts.hostname, ALPNProtocols: ['http/1.1'] });
      t.once('error', fail);
      t.once('secureConnect', () => { t.removeListener('error', fail); s.removeListener('error', fail); finish(null, t); });
    };
    s.on('data', onData);
  };

  const https = new Agent({ connect: tunnel });
  const http = new Agent({ connect: toProxy });
  globalThis[slot] = {
    dispatch(opts, handler) {
      const o = new URL(String(opts.origin));
      if (o.protocol === 'https:') return https.dispatch(opts, handler);
      // The proxy serves one request per connection: no reuse.
      return http.dispatch({ ...opts, origin: proxy.origin, path: o.origin + opts.path, reset: true }, handler);
    },
    close() { return Promise.all([https.close(), http.close(), base.close()]); },
    destroy(err) { return Promise.all([https.destroy(err), http.destroy(err), base.destroy(err)]); },
  };
}

if (major < 24 && proxyURL && typeof globalThis.fetch === 'function') {
  try {
    install();
  } catch (err) {
    process.emitWarning(`sandboxd: fetch cannot use the egress proxy: ${err.message}`);
  }
}
