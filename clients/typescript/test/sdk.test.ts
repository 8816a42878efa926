// The TypeScript SDK against a real supervisor. integration/clients_test.go
// starts sandboxd (as its non-root service user, with the real helper and
// bubblewrap), builds this package and runs `node --test` with:
//
//   SANDBOXD_SOCKET: the supervisor's socket (one exec slot per caller and
//     no queue, so a second concurrent exec is a 429);
//   SANDBOXD_TEST_URL, SANDBOXD_TEST_API_KEY, SANDBOXD_TEST_CA_FILE: its
//     HTTPS listener, a key of its keys file, the CA of its certificate.
//
// Without SANDBOXD_SOCKET the live tests skip (under CI=true they fail).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { describe, it } from "node:test";
import { inspect } from "node:util";

import {
  ConnectionFailedError, InvalidRequestError, NotFoundError, RateLimitedError, Result, Sandbox, SandboxdError,
  TimeoutError, UnauthenticatedError, groupDisplays,
} from "../src/index.js";
import type { Display, OutputMessage } from "../src/index.js";

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const live = process.env.SANDBOXD_SOCKET ? {} : { skip: "SANDBOXD_SOCKET is not set (integration/clients_test.go sets it)" };
if (!process.env.SANDBOXD_SOCKET && process.env.CI === "true") throw new Error("SANDBOXD_SOCKET is not set: run through integration/clients_test.go");

describe("one-shot", live, () => {
  const sandbox = new Sandbox();

  it("runs code", async () => {
    const ex = await sandbox.runCode("print(6 * 7)");
    assert.deepEqual(ex.logs, { stdout: ["42\n"], stderr: [] });
    assert.equal(ex.exitCode, 0);
    assert.equal(ex.error, undefined);
    assert.match(ex.id, /^[0-9a-f]{32}$/);
    assert.deepEqual(ex.results, []);
  });

  it("passes env, stdin, files; runs javascript and shell", async () => {
    const ex = await sandbox.runCode("import os, sys; print(os.environ['GREETING'], sys.stdin.read(), open('in.txt').read())", {
      env: { GREETING: "hello" }, stdin: "world", files: { "in.txt": Buffer.from("staged") },
    });
    assert.equal(ex.stdout, "hello world staged\n");
    const js = await sandbox.runCode("console.log(process.env.N * 2)", { language: "javascript", env: { N: "21" } });
    assert.equal(js.stdout, "42\n");
    const sh = await sandbox.runCode("echo $((6*7)); exit 3", { language: "shell" });
    assert.deepEqual([sh.stdout, sh.exitCode], ["42\n", 3]);
  });

  it("reports an exception with name, value and traceback", async () => {
    const ex = await sandbox.runCode("function f() { throw new RangeError('bad input') }\nf()", { language: "javascript" });
    assert.equal(ex.exitCode, 1);
    assert.equal(ex.error?.name, "RangeError");
    assert.equal(ex.error?.value, "bad input");
    assert.match(ex.error?.traceback ?? "", /at f /);
  });

  it("throws TimeoutError with the execution", async () => {
    await assert.rejects(sandbox.runCode("print('before', flush=True)\nwhile True: pass", { timeoutMs: 1000 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutError && e instanceof SandboxdError);
      assert.equal(e.execution.timedOut, true);
      assert.equal(e.execution.signal, "SIGKILL");
      assert.equal(e.execution.exitCode, null);
      assert.equal(e.execution.stdout, "before\n");
      return true;
    });
  });

  it("brings artifacts back", async () => {
    const ex = await sandbox.runCode("open('out.bin', 'wb').write(bytes(range(256)))", { artifacts: ["*.bin"] });
    assert.deepEqual(ex.artifacts.map((a) => a.path), ["out.bin"]);
    assert.deepEqual(Buffer.from(ex.artifacts[0].content_base64, "base64"), Buffer.from([...Array(256).keys()]));
  });

  it("maps refusals to their errors", async () => {
    await assert.rejects(sandbox.runCode("print(1)", { language: "ruby" as "python" }), (e: unknown) => {
      assert.ok(e instanceof InvalidRequestError);
      assert.equal(e.status, 400);
      assert.equal(e.code, "invalid_argument");
      assert.match(e.message, /ruby/);
      return true;
    });
    await assert.rejects(sandbox.getSession("0".repeat(32)), NotFoundError);
    await assert.rejects(new Sandbox({ socketPath: "/nonexistent/sandboxd.sock" }).runCode("print(1)"), ConnectionFailedError);
  });

  it("streams events as an async iterator", async () => {
    const stream = await sandbox.streamCode("import time, sys\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\nprint('e', file=sys.stderr)");
    const events = [];
    for await (const ev of stream) events.push(ev);
    assert.deepEqual(events.filter((e) => e.type === "stdout").map((e) => (e as { text: string }).text), ["0\n", "1\n", "2\n"]);
    assert.ok(events.some((e) => e.type === "stderr" && e.text === "e\n"));
    assert.equal(stream.execution?.exitCode, 0);
    assert.deepEqual(stream.execution?.logs.stdout, ["0\n", "1\n", "2\n"]);
  });

  it("throws TimeoutError at the end of a timed-out stream", async () => {
    const stream = await sandbox.streamCode("print('tick', flush=True)\nwhile True: pass", { timeoutMs: 1000 });
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const ev of stream) if (ev.type === "stdout") seen.push(ev.text);
    }, (e: unknown) => e instanceof TimeoutError && e.execution === stream.execution);
    assert.deepEqual(seen, ["tick\n"]);
  });

  it("calls back before the exec ends", async () => {
    const seen: Array<[string, number]> = [];
    const start = Date.now();
    const ex = await sandbox.runCode("import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second', flush=True)", {
      onStdout: (m: OutputMessage) => seen.push([m.line, Date.now() - start]),
    });
    assert.deepEqual(seen.map((s) => s[0]), ["first\n", "second\n"]);
    assert.ok(seen[0][1] + 1000 < seen[1][1], `the first line was not streamed before the second: ${JSON.stringify(seen)}`);
    assert.equal(ex.exitCode, 0);
  });

  it("surfaces a 429 as RateLimitedError with retryAfter", async () => {
    // One exec slot per caller and no queue: an exec while another runs is refused at once.
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const long = sandbox.runCode("import time\nprint('running', flush=True)\ntime.sleep(3)", { timeoutMs: 20000, onStdout: () => started() });
    await Promise.race([running, long]);
    await assert.rejects(sandbox.runCode("print(1)"), (e: unknown) => {
      assert.ok(e instanceof RateLimitedError);
      assert.equal(e.status, 429);
      assert.equal(e.retryAfter, 1);
      return true;
    });
    assert.equal((await long).exitCode, 0);
  });
});

describe("sessions", live, () => {
  const sandbox = new Sandbox();

  it("returns a matplotlib chart as PNG bytes", async () => {
    await sandbox.withSession(async (s) => {
      const ex = await s.runCode("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 3, 2])");
      const pngs = ex.results.filter((r) => r.png !== undefined);
      assert.equal(pngs.length, 1, JSON.stringify(ex.displays.map((d) => d.mime)));
      const png = pngs[0].pngBytes()!;
      assert.deepEqual(png.subarray(0, 8), PNG_SIGNATURE);
      assert.ok(pngs[0].formats().includes("png"));
    });
  });

  it("runs the README's example", async () => {
    await sandbox.withSession(async (s) => {
      const chart = await s.runCode("import matplotlib.pyplot as plt; plt.plot([1, 3, 2]);");
      assert.equal(chart.results.length, 1, JSON.stringify(chart.displays.map((d) => d.mime)));
      assert.deepEqual(chart.results[0].pngBytes()?.subarray(0, 8), PNG_SIGNATURE);
    });
  });

  it("keeps state and returns rich results", async () => {
    await sandbox.withSession(async (s) => {
      await s.runCode("x = 41");
      const ex = await s.runCode("x + 1");
      assert.equal(ex.text, "42");
      assert.equal(ex.kernel?.execution_count, 2);
      const df = await s.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})");
      assert.equal(df.results.length, 1, JSON.stringify(df.displays));
      assert.match(df.results[0].html ?? "", /<table/);
      assert.match(df.results[0].text ?? "", /a {2}b/);
      const js = await s.runCode("const y = 20; y + 22", { language: "javascript" });
      assert.equal(js.text, "42");
      const shown = await s.runCode("display('application/json', {k: [1, 2]}); display('text/html', '<b>x</b>')", { language: "javascript" });
      assert.deepEqual(shown.results[0].json, { k: [1, 2] });
      assert.equal(shown.results.find((r) => r.html)?.html, "<b>x</b>");
    });
  });

  it("streams session output and results, and restarts a timed-out kernel", async () => {
    const s = await Sandbox.session({ sandbox });
    try {
      const out: string[] = [];
      const results: Result[] = [];
      const ex = await s.runCode("import matplotlib.pyplot as plt\nprint('drawing')\nplt.plot([1, 2])", {
        onStdout: (m) => out.push(m.line), onResult: (r) => results.push(r),
      });
      assert.equal(out.join(""), "drawing\n");
      const pngs = results.filter((r) => r.png !== undefined);
      assert.equal(pngs.length, 1);
      assert.deepEqual(pngs[0].pngBytes()!.subarray(0, 8), PNG_SIGNATURE);
      assert.deepEqual(ex.results.flatMap((r) => r.formats()).sort(), results.flatMap((r) => r.formats()).sort());
      await assert.rejects(s.runCode("import time\ntime.sleep(30)", { timeoutMs: 1000 }), (e: unknown) => e instanceof TimeoutError && e.execution.timedOut);
      const after = await s.runCode("print('alive')");
      assert.equal(after.stdout, "alive\n");
      assert.equal(after.kernel?.restarted, true);
    } finally {
      await s.kill();
    }
  });

  it("round-trips files byte-exact", async () => {
    const binary = Buffer.concat([Buffer.from([...Array(256).keys()].flatMap((b) => Array(4096).fill(b))), Buffer.from([0, 13, 10, 255])]);
    const sha = createHash("sha256").update(binary).digest("hex");
    await sandbox.withSession(async (s) => {
      const info = await s.files.write("data/blob.bin", binary);
      assert.deepEqual(info, { path: "data/blob.bin", size: binary.length, sha256: sha });
      assert.deepEqual(await s.files.read("data/blob.bin", { format: "bytes" }), binary);
      const chunks: Buffer[] = [];
      for await (const c of await s.files.read("data/blob.bin", { format: "stream" })) chunks.push(c);
      assert.deepEqual(Buffer.concat(chunks), binary);
      await s.files.write("chunked.bin", Readable.from([binary.subarray(0, 1000), binary.subarray(1000)]));
      assert.deepEqual(await s.files.read("chunked.bin", { format: "bytes" }), binary);
      await s.files.write("naïve name.txt", "héllo\n");
      assert.equal(await s.files.read("naïve name.txt"), "héllo\n");
      const ex = await s.runCode("import hashlib; print(hashlib.sha256(open('data/blob.bin','rb').read()).hexdigest())\nopen('out.bin', 'wb').write(bytes(range(255, -1, -1)))");
      assert.equal(ex.stdout.trim(), sha);
      assert.deepEqual(await s.files.read("out.bin", { format: "bytes" }), Buffer.from([...Array(256).keys()].reverse()));
      const entries = new Map((await s.files.list()).map((e) => [e.path, e]));
      assert.equal(entries.get("data")?.type, "dir");
      assert.equal(entries.get("data/blob.bin")?.type, "file");
      assert.equal(entries.get("data/blob.bin")?.size, binary.length);
      assert.deepEqual((await s.files.list("data")).map((e) => e.name), ["blob.bin"]);
      assert.equal(await s.files.exists("out.bin"), true);
      await s.files.remove("out.bin");
      assert.equal(await s.files.exists("out.bin"), false);
      await assert.rejects(s.files.read("out.bin"), NotFoundError);
    });
  });

  it("lists, finds, restarts and deletes sessions", async () => {
    const s = await sandbox.session({ ttlSeconds: 600, key: "ts-sdk-test" });
    assert.equal(s.info.ttl_seconds, 600);
    assert.ok((await sandbox.listSessions()).some((x) => x.id === s.id));
    assert.equal((await sandbox.getSession(s.id)).id, s.id);
    await s.runCode("print(1)");
    assert.equal((await s.restartKernel("python")).restarted, true);
    await s.kill();
    await assert.rejects(sandbox.getSession(s.id), NotFoundError);
    await s.kill(); // already gone: not an error
  });
});

describe("remote", () => {
  const url = process.env.SANDBOXD_TEST_URL ?? "";
  const opts = url ? {} : { skip: "SANDBOXD_TEST_URL is not set" };
  if (!url && process.env.CI === "true") throw new Error("SANDBOXD_TEST_URL is not set");
  const apiKey = process.env.SANDBOXD_TEST_API_KEY ?? "";
  const caFile = process.env.SANDBOXD_TEST_CA_FILE ?? "";

  it("runs over HTTPS with a key and a CA file", opts, async () => {
    const sb = new Sandbox({ url, apiKey, caFile });
    assert.equal((await sb.runCode("print('over tls')")).stdout, "over tls\n");
    await sb.withSession(async (s) => {
      await s.files.write("k.txt", "key caller");
      assert.equal((await s.runCode("print(open('k.txt').read())")).stdout, "key caller\n");
      // A bodyless POST: over TCP it must still declare JSON.
      assert.equal((await s.restartKernel("python")).restarted, true);
    });
    assert.equal((await sb.health()).ok, true);
  });

  it("refuses a wrong key and an unknown CA", opts, async () => {
    await assert.rejects(new Sandbox({ url, apiKey: "0".repeat(48), caFile }).runCode("print(1)"), (e: unknown) => e instanceof UnauthenticatedError && e.status === 401);
    await assert.rejects(new Sandbox({ url, apiKey }).runCode("print(1)"), ConnectionFailedError);
  });

  it("takes the URL from the environment", opts, async () => {
    const saved = { ...process.env };
    try {
      Object.assign(process.env, { SANDBOXD_URL: url, SANDBOXD_API_KEY: apiKey, SANDBOXD_CA_FILE: caFile });
      assert.equal((await new Sandbox().runCode("print(2)")).stdout, "2\n");
    } finally {
      for (const k of ["SANDBOXD_URL", "SANDBOXD_API_KEY", "SANDBOXD_CA_FILE"]) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
  });
});

describe("offline", () => {
  it("never shows the API key when a Sandbox is inspected", () => {
    const key = "k".repeat(48);
    const shown = inspect(new Sandbox({ url: "http://127.0.0.1:9", apiKey: key }), { depth: 10, showHidden: true });
    assert.ok(!shown.includes(key.slice(0, 16)), shown);
    assert.match(shown, /127\.0\.0\.1:9/);
  });

  it("refuses bad connection options", () => {
    assert.throws(() => new Sandbox({ url: "ftp://h:1" }), /want http:\/\/HOST:PORT/);
    assert.throws(() => new Sandbox({ url: "http://h:1", caFile: "/ca.pem" }), /not https/);
    assert.throws(() => new Sandbox({ url: "http://h:1", apiKey: "a\nb" }), /line break/);
    assert.throws(() => new Sandbox({ socketPath: "/s", caFile: "/ca.pem" }), /need a url/);
  });
});

describe("models", () => {
  it("groups displays into one result per object", () => {
    const png: Display = { mime: "image/png", data_base64: PNG_SIGNATURE.toString("base64") };
    const html: Display = { mime: "text/html", data: "<table/>" };
    const plain: Display = { mime: "text/plain", data: "df" };
    const jpeg: Display = { mime: "image/jpeg", data_base64: "AA==" };
    const svg: Display = { mime: "image/svg+xml", data: "<svg/>" };
    const md: Display = { mime: "text/markdown", data: "**x**" };
    const groups = groupDisplays([png, png, html, plain, plain, jpeg, svg, html, png, jpeg, md, { mime: "x/new", data: 1 }]);
    assert.deepEqual(groups.map((r) => r.formats()), [["png"], ["png"], ["text", "html"], ["text"], ["jpeg"], ["html", "svg"], ["png", "jpeg"], ["markdown", "x/new"]]);
    assert.deepEqual(groups[4].jpegBytes(), Buffer.from([0]));
    assert.equal(groups[7].markdown, "**x**");
    assert.equal(groups[7].extra["x/new"], 1);
    // Types in any order group as one object, up to its text/plain.
    const latex: Display = { mime: "text/latex", data: "$x$" };
    assert.deepEqual(groupDisplays([md, latex, svg, html, plain, latex, md]).map((r) => r.formats()),
      [["text", "html", "markdown", "latex", "svg"], ["markdown", "latex"]]);
  });
});
