// The official MCP TypeScript SDK's client against `sandboxctl mcp`, which
// talks to a real supervisor (integration/TestMCPOfficialSDK starts one and
// sets SANDBOXCTL and SANDBOXD_SOCKET). Every answer passes through the
// SDK's own schema validation; the tests check what an agent relies on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Ajv from 'ajv';

const sandboxctl = process.env.SANDBOXCTL;
const socket = process.env.SANDBOXD_SOCKET;
if (!sandboxctl || !socket) {
  throw new Error('set SANDBOXCTL and SANDBOXD_SOCKET (integration/TestMCPOfficialSDK does)');
}

let client;
let transport;
let closed = false;

before(async () => {
  transport = new StdioClientTransport({ command: sandboxctl, args: ['mcp', '--socket', socket], stderr: 'inherit' });
  client = new Client({ name: 'sandboxd-sdktest', version: '1.0.0' });
  await client.connect(transport);
  transport.onclose = () => { closed = true; };
});

after(async () => {
  if (!closed) await client.close();
});

const text = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);

test('initialize names the server and the tools capability', () => {
  const info = client.getServerVersion();
  assert.equal(info.name, 'sandboxd');
  assert.ok(client.getServerCapabilities().tools, 'tools capability');
});

test('tools/list: six tools, each input schema a valid JSON Schema', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(),
    ['create_session', 'delete_session', 'download_file', 'list_files', 'run_code', 'upload_file']);
  const ajv = new Ajv({ strict: false });
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.ok(ajv.compile(t.inputSchema), `${t.name}: schema compiles`);
  }
  const run = tools.find((t) => t.name === 'run_code');
  const validate = ajv.compile(run.inputSchema);
  assert.ok(validate({ language: 'python', code: 'print(1)' }));
  assert.ok(!validate({ language: 'cobol', code: 'x' }), 'an unknown language is outside the schema');
});

test('run_code one-shot in python and javascript', async () => {
  let res = await call('run_code', { language: 'python', code: 'print(6*7)' });
  assert.equal(res.isError, false);
  assert.match(text(res), /status: exit code 0/);
  assert.match(text(res), /42/);
  res = await call('run_code', { language: 'javascript', code: 'console.log([1,2,3].map(x => x * 2).join(","))' });
  assert.match(text(res), /2,4,6/);
  res = await call('run_code', { language: 'python', code: 'raise ValueError("bad input")' });
  assert.match(text(res), /status: exit code 1/);
  assert.match(text(res), /ValueError: bad input/);
});

test('a one-shot chart: run_code without a session returns the PNG (a throwaway kernel)', async () => {
  const res = await call('run_code', {
    language: 'python',
    code: 'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()\nprint("drawn")',
  });
  assert.equal(res.isError, false, text(res));
  assert.match(text(res), /drawn/);
  const img = res.content.find((c) => c.type === 'image');
  assert.ok(img, `a one-shot chart comes back as an image: ${text(res)}`);
  assert.equal(img.mimeType, 'image/png');
  assert.ok(Buffer.from(img.data, 'base64').subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'PNG signature');
  // mode "process" keeps a plain interpreter: no displays.
  const plain = await call('run_code', { language: 'python', mode: 'process', code: 'import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\nprint("plain")' });
  assert.match(text(plain), /plain/);
  assert.ok(!plain.content.some((c) => c.type === 'image'), `process mode returns no display: ${text(plain)}`);
});

test('sessions, files and a chart', async () => {
  const created = await call('create_session', {});
  const id = created.structuredContent.id;
  assert.match(id, /^[0-9a-f]+$/);

  await call('upload_file', { session: id, path: 'data/in.csv', content: 'x,y\n1,2\n2,4\n3,9\n' });
  const blob = randomBytes(4096);
  await call('upload_file', { session: id, path: 'blob.bin', content_base64: blob.toString('base64') });
  const listed = await call('list_files', { session: id });
  const paths = listed.structuredContent.files.filter((f) => !f.mode.startsWith('d')).map((f) => f.path).sort();
  assert.deepEqual(paths, ['blob.bin', 'data/in.csv']);

  const back = await call('download_file', { session: id, path: 'blob.bin' });
  assert.equal(back.content[0].type, 'resource');
  assert.ok(Buffer.from(back.content[0].resource.blob, 'base64').equals(blob), 'binary round trip');

  const chart = await call('run_code', {
    session: id, language: 'python',
    code: 'import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.read_csv("data/in.csv")\ndf.plot(x="x", y="y")\nplt.show()',
  });
  assert.equal(chart.isError, false, text(chart));
  const img = chart.content.find((c) => c.type === 'image');
  assert.ok(img, `a chart comes back as an image: ${text(chart)}`);
  assert.equal(img.mimeType, 'image/png');
  assert.ok(Buffer.from(img.data, 'base64').subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'PNG signature');

  // State persists in the session's kernel.
  const state = await call('run_code', { session: id, language: 'python', code: 'print(int(df.y.sum()))' });
  assert.match(text(state), /^15$/m);

  // A file too large for one message is refused with a reason, and the
  // connection stays up.
  await call('upload_file', { session: id, path: 'big.bin', content_base64: randomBytes(7 << 20).toString('base64') });
  const big = await call('download_file', { session: id, path: 'big.bin' });
  assert.equal(big.isError, true);
  assert.match(text(big), /larger than/);
  await client.ping();

  const del = await call('delete_session', { session: id });
  assert.match(text(del), /deleted/);
});

test('cancellation ends the call and the session stays usable', async () => {
  const id = (await call('create_session', {})).structuredContent.id;
  const ac = new AbortController();
  const started = Date.now();
  const pending = call('run_code', { session: id, language: 'python', code: 'import time\ntime.sleep(60)' }, { signal: ac.signal, timeout: 120000 });
  setTimeout(() => ac.abort('test cancels'), 1500);
  await assert.rejects(pending);
  assert.ok(Date.now() - started < 30000, 'cancelled well before the sleep ends');
  const next = await call('run_code', { session: id, language: 'python', code: 'print("after")' }, { timeout: 120000 });
  assert.match(text(next), /after/);
  await call('delete_session', { session: id });
});

test('shutdown: closing the client ends the server', async () => {
  const t0 = Date.now();
  await client.close();
  assert.ok(closed, 'transport closed');
  // The SDK sends SIGTERM 2 s after closing stdin to a server that is
  // still running; sandboxctl mcp exits on end of input before that.
  assert.ok(Date.now() - t0 < 2000, `close took ${Date.now() - t0} ms`);
});
