// The official E2B code interpreter SDK (@e2b/code-interpreter, pinned in
// package-lock.json) against sandboxd's E2B-compatible endpoint. The calls
// are the SDK's documented examples, unmodified; only the environment
// points the SDK at sandboxd: E2B_API_URL and E2B_SANDBOX_URL (both the
// endpoint) and E2B_API_KEY (a sandboxd API key). E2B_OTHER_KEY is a second
// key. integration/TestE2BOfficialSDK sets them and runs this file.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY', 'E2B_OTHER_KEY']) {
  assert.ok(process.env[v], `${v} must be set`)
}

let sandbox

before(async () => {
  sandbox = await Sandbox.create()
})

after(async () => {
  if (sandbox) await sandbox.kill().catch(() => {})
})

test('run code', async () => {
  const execution = await sandbox.runCode('print("hello world")')
  assert.deepEqual(execution.logs.stdout, ['hello world\n'])
  assert.equal(execution.error, undefined)
})

test('state across calls', async () => {
  await sandbox.runCode('x = 1')
  const execution = await sandbox.runCode('x+=1; x')
  assert.equal(execution.text, '2')
  assert.equal(execution.results.length, 1)
  assert.equal(execution.results[0].isMainResult, true)
})

test('a matplotlib chart comes back as PNG', async () => {
  const code = `
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 20, 100)
y = np.sin(x)

plt.plot(x, y)
plt.show()
`
  const execution = await sandbox.runCode(code)
  assert.equal(execution.error, undefined, JSON.stringify(execution.error))
  const png = execution.results.find((r) => r.png)
  assert.ok(png, `no png result: ${JSON.stringify(execution.results.map((r) => r.formats()))}`)
  const bytes = Buffer.from(png.png, 'base64')
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  assert.ok(bytes.length > 1000)
})

test('a pandas DataFrame comes back as HTML', async () => {
  const execution = await sandbox.runCode(`
import pandas as pd
df = pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]})
df
`)
  assert.equal(execution.results.length, 1, JSON.stringify(execution.results))
  const r = execution.results[0]
  assert.match(r.html, /<table/)
  assert.match(r.text, /a\s+b/)
  assert.equal(r.isMainResult, true)
  assert.deepEqual(r.formats(), ['html'])
})

test('per-call env', async () => {
  const execution = await sandbox.runCode('import os; print(os.environ.get("MY_VAR"))', {
    envs: { MY_VAR: 'my_value' },
  })
  assert.deepEqual(execution.logs.stdout, ['my_value\n'])
  // For that call only.
  const again = await sandbox.runCode('import os; print(os.environ.get("MY_VAR"))')
  assert.deepEqual(again.logs.stdout, ['None\n'])
})

test('a streamed loop, with callbacks', async () => {
  const seen = []
  const times = []
  const code = `
import time
for i in range(3):
    print(i, flush=True)
    time.sleep(0.5)
`
  const execution = await sandbox.runCode(code, {
    onStdout: (data) => { seen.push(data.line); times.push(Date.now()) },
    onStderr: (data) => assert.fail(`stderr: ${data.line}`),
  })
  assert.deepEqual(seen, ['0\n', '1\n', '2\n'])
  assert.deepEqual(execution.logs.stdout, seen)
  // Streamed as printed, not at the end.
  assert.ok(times[2] - times[0] >= 700, `callbacks ${times[2] - times[0]} ms apart`)
})

test('javascript', async () => {
  const execution = await sandbox.runCode('const y = 40 + 2; console.log(y); y', { language: 'js' })
  assert.deepEqual(execution.logs.stdout, ['42\n'])
  assert.equal(execution.text, '42')
})

test('files: write, read, list', async () => {
  await sandbox.files.write('/home/user/my-file', 'Hello, world!')
  const content = await sandbox.files.read('/home/user/my-file')
  assert.equal(content, 'Hello, world!')
  await sandbox.files.write('data/nums.csv', 'a,b\n1,2\n')
  const files = await sandbox.files.list('/home/user')
  const names = files.map((f) => `${f.name}:${f.type}`)
  // (matplotlib's caches are there too: HOME is the workspace)
  assert.ok(names.includes('data:dir') && names.includes('my-file:file'), JSON.stringify(names))
  assert.equal(files.find((f) => f.name === 'my-file').path, '/workspace/my-file')
  const inDir = await sandbox.files.list('data')
  assert.equal(inDir[0].name, 'nums.csv')
  assert.equal(inDir[0].size, 8)
  // The code sees the same files.
  const execution = await sandbox.runCode('print(open("data/nums.csv").read(), end="")')
  assert.equal(execution.logs.stdout.join(''), 'a,b\n1,2\n')
  // Bytes round-trip exactly.
  const bin = new Uint8Array(256).map((_, i) => i)
  await sandbox.files.write('bin.dat', bin.buffer)
  const back = await sandbox.files.read('bin.dat', { format: 'bytes' })
  assert.deepEqual([...back], [...bin])
  assert.equal(await sandbox.files.exists('nope.txt'), false)
  await assert.rejects(sandbox.files.read('nope.txt'), { name: 'FileNotFoundError' })
})

test('an error with its traceback', async () => {
  const execution = await sandbox.runCode('def f():\n    raise ValueError("boom")\nf()')
  assert.ok(execution.error)
  assert.equal(execution.error.name, 'ValueError')
  assert.equal(execution.error.value, 'boom')
  assert.match(execution.error.traceback, /in f/)
  // The kernel lives on, its state kept.
  const next = await sandbox.runCode('f.__name__')
  assert.equal(next.text, "'f'")
})

test('contexts: create, list, run in, restart, remove', async () => {
  const ctx = await sandbox.createCodeContext({ language: 'javascript' })
  assert.equal(ctx.language, 'javascript')
  await sandbox.runCode('globalThis.z = 7', { context: ctx })
  const z = await sandbox.runCode('z', { context: ctx })
  assert.equal(z.text, '7')
  const ids = (await sandbox.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(ctx.id), JSON.stringify(ids))
  await sandbox.restartCodeContext(ctx)
  const gone = await sandbox.runCode('typeof z', { context: ctx })
  assert.equal(gone.text, "'undefined'")
  await sandbox.removeCodeContext(ctx.id)
  const after = (await sandbox.listCodeContexts()).map((c) => c.id)
  assert.ok(!after.includes(ctx.id), JSON.stringify(after))
})

test('another key cannot reach the sandbox; a wrong key creates nothing', async () => {
  assert.equal(await Sandbox.kill(sandbox.sandboxId, { apiKey: process.env.E2B_OTHER_KEY }), false)
  await assert.rejects(Sandbox.create({ apiKey: 'not-a-key' }), { name: 'AuthenticationError' })
  // A sandbox route without the sandbox's access token is refused.
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/execute`, {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'E2b-Sandbox-Port': '49999', 'X-Access-Token': 'x'.repeat(64) },
    body: JSON.stringify({ code: 'print(1)' }),
  })
  assert.equal(res.status, 401)
  assert.equal((await sandbox.runCode('print(1)')).logs.stdout[0], '1\n')
})

test('what is not supported says so', async () => {
  await assert.rejects(sandbox.commands.run('ls'), (err) => {
    assert.match(String(err), /does not support commands/)
    return true
  })
  await assert.rejects(sandbox.files.makeDir('newdir'), (err) => {
    assert.match(String(err), /does not support filesystem\.MakeDir/)
    return true
  })
  // (the SDK shows the status only for the code interpreter's 4xx; the
  // message is in the body. A short request timeout: see 'kill'.)
  await assert.rejects(sandbox.runCode('1', { language: 'r', requestTimeoutMs: 2000 }), (err) => {
    assert.match(String(err), /400 Bad Request/)
    return true
  })
  await assert.rejects(sandbox.files.read('/etc/passwd'), (err) => {
    assert.match(String(err), /outside the sandbox's workspace/)
    return true
  })
})

test('kill', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 60_000 })
  assert.equal(await sbx.isRunning(), true)
  await sbx.kill()
  assert.equal(await sbx.isRunning(), false)
  // (a short request timeout: the SDK leaves its timer running when a
  // request fails, which would keep node alive for the default minute)
  await assert.rejects(sbx.runCode('print(1)', { requestTimeoutMs: 2000 }), { name: 'TimeoutError' })
})
