"""The Python SDK against a real supervisor.

integration/clients_test.go starts sandboxd (as its non-root service user,
with the real helper and bubblewrap) and runs these tests with the SDK
installed, passing where to reach it:

- SANDBOXD_SOCKET: the supervisor's socket (its per-caller exec share is
  one slot and its queue empty, so a second concurrent exec is a 429);
- SANDBOXD_TEST_URL, SANDBOXD_TEST_API_KEY, SANDBOXD_TEST_CA_FILE: its
  HTTPS listener, a key of its keys file, and the CA of its certificate.

Without SANDBOXD_SOCKET the tests are skipped (under CI=true they fail).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
import time
import unittest
from typing import List

import sandboxd
from sandboxd import (ConnectionFailed, InvalidRequest, NotFound, RateLimited, Result, Sandbox, Timeout,
                      Unauthenticated)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The tests share the caller's one exec slot, and an exec holds it until
# just after its answer is written, so the next test's first request can
# meet a 429 for a moment. Every request but the one a test expects a 429
# from waits for the slot (re-sending a body it still has; a streamed body
# is never re-sent).
_transport_request = sandboxd._transport.Transport.request
_expect_429 = threading.local()


def _request_when_free(self, method, path, body=None, **kw):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while True:
        resp = _transport_request(self, method, path, body, **kw)
        resendable = body is None or isinstance(body, (bytes, bytearray, str))
        if resp.status != 429 or getattr(_expect_429, "on", False) or not resendable or time.monotonic() > deadline:
            return resp
        resp.close()
        time.sleep(0.2)


sandboxd._transport.Transport.request = _request_when_free  # type: ignore[method-assign]


class Live(unittest.TestCase):
    """Tests that need the supervisor of SANDBOXD_SOCKET."""

    @classmethod
    def setUpClass(cls) -> None:
        if not os.environ.get("SANDBOXD_SOCKET"):
            if os.environ.get("CI") == "true":
                raise RuntimeError("SANDBOXD_SOCKET is not set: run these tests through integration/clients_test.go")
            raise unittest.SkipTest("SANDBOXD_SOCKET is not set (integration/clients_test.go sets it)")


class OneShot(Live):
    def setUp(self) -> None:
        self.sandbox = Sandbox()

    def test_run_code(self) -> None:
        ex = self.sandbox.run_code("print(6 * 7)")
        self.assertEqual(ex.logs.stdout, ["42\n"])
        self.assertEqual(ex.logs.stderr, [])
        self.assertEqual(ex.exit_code, 0)
        self.assertIsNone(ex.error)
        self.assertRegex(ex.id, "^[0-9a-f]{32}$")
        self.assertEqual(ex.results, [])  # a one-shot exec has no displays

    def test_env_stdin_files_and_languages(self) -> None:
        ex = self.sandbox.run_code("import os, sys; print(os.environ['GREETING'], sys.stdin.read(), open('in.txt').read())",
                                   env={"GREETING": "hello"}, stdin="world", files={"in.txt": b"staged"})
        self.assertEqual(ex.stdout, "hello world staged\n")
        js = self.sandbox.run_code("console.log(process.env.N * 2)", language="javascript", env={"N": "21"})
        self.assertEqual(js.stdout, "42\n")
        sh = self.sandbox.run_code("echo $((6*7)); exit 3", language="shell")
        self.assertEqual((sh.stdout, sh.exit_code), ("42\n", 3))

    def test_error_has_name_value_traceback(self) -> None:
        ex = self.sandbox.run_code("def f():\n    raise ValueError('bad input')\nf()")
        self.assertEqual(ex.exit_code, 1)
        assert ex.error is not None
        self.assertEqual((ex.error.name, ex.error.value), ("ValueError", "bad input"))
        self.assertIn("in f", ex.error.traceback)

    def test_timeout_raises_with_the_execution(self) -> None:
        start = time.monotonic()
        with self.assertRaises(Timeout) as cm:
            self.sandbox.run_code("print('before', flush=True)\nwhile True: pass", timeout=1)
        ex = cm.exception.execution
        self.assertTrue(ex.timed_out)
        self.assertEqual(ex.signal, "SIGKILL")
        self.assertIsNone(ex.exit_code)
        self.assertEqual(ex.stdout, "before\n")
        self.assertLess(time.monotonic() - start, 20)

    def test_artifacts(self) -> None:
        ex = self.sandbox.run_code("open('out.bin', 'wb').write(bytes(range(256)))", artifacts=["*.bin"])
        self.assertEqual([a.path for a in ex.artifacts], ["out.bin"])
        self.assertEqual(ex.artifacts[0].content, bytes(range(256)))

    def test_refusals_raise_their_exceptions(self) -> None:
        with self.assertRaises(InvalidRequest) as cm:
            self.sandbox.run_code("print(1)", language="ruby")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_argument"))
        self.assertIn("ruby", str(cm.exception))
        with self.assertRaises(NotFound):
            self.sandbox.get_session("0" * 32)
        with self.assertRaises(ConnectionFailed):
            Sandbox("/nonexistent/sandboxd.sock").run_code("print(1)")

    def test_stream_iterator(self) -> None:
        code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\nimport sys; print('e', file=sys.stderr)"
        with self.sandbox.stream_code(code) as stream:
            events = list(stream)
        self.assertEqual([e.text for e in events if e.type == "stdout"], ["0\n", "1\n", "2\n"])
        self.assertIn("e\n", [e.text for e in events if e.type == "stderr"])
        assert stream.execution is not None
        self.assertEqual(stream.execution.exit_code, 0)
        self.assertEqual(stream.execution.logs.stdout, ["0\n", "1\n", "2\n"])

    def test_stream_timeout_raises_at_the_end(self) -> None:
        with self.sandbox.stream_code("print('tick', flush=True)\nwhile True: pass", timeout=1) as stream:
            seen = []
            with self.assertRaises(Timeout) as cm:
                for ev in stream:
                    seen.append(ev.text)
        self.assertEqual(seen, ["tick\n"])
        self.assertIs(cm.exception.execution, stream.execution)
        self.assertEqual(cm.exception.execution.logs.stdout, ["tick\n"])

    def test_callbacks_arrive_before_the_end(self) -> None:
        seen = []
        code = "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second', flush=True)"
        start = time.monotonic()
        ex = self.sandbox.run_code(code, on_stdout=lambda m: seen.append((m.line, time.monotonic() - start)))
        self.assertEqual([s[0] for s in seen], ["first\n", "second\n"])
        self.assertLess(seen[0][1] + 1.0, seen[1][1], "the first line was not streamed before the second")
        self.assertEqual(ex.exit_code, 0)

    def test_rate_limited_has_retry_after(self) -> None:
        # The supervisor gives this caller one exec slot and no queue: an
        # exec while another one runs is refused with 429 at once.
        running = threading.Event()
        errors = []

        def long_exec() -> None:
            try:
                self.sandbox.run_code("import time\nprint('running', flush=True)\ntime.sleep(3)", timeout=20,
                                      on_stdout=lambda m: running.set())
            except Exception as e:  # reported below
                errors.append(e)
                running.set()

        t = threading.Thread(target=long_exec)
        t.start()
        try:
            self.assertTrue(running.wait(20), "the long exec never started")
            self.assertEqual(errors, [])
            _expect_429.on = True
            try:
                with self.assertRaises(RateLimited) as cm:
                    self.sandbox.run_code("print(1)")
            finally:
                _expect_429.on = False
            self.assertEqual(cm.exception.status, 429)
            self.assertEqual(cm.exception.retry_after, 1.0)
            self.assertIsInstance(cm.exception, sandboxd.SandboxdError)
        finally:
            t.join(30)
        self.assertEqual(errors, [])


class Sessions(Live):
    def test_chart_comes_back_as_png(self) -> None:
        with Sandbox.session() as s:
            ex = s.run_code("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 3, 2])")
            pngs = [r for r in ex.results if r.png is not None]
            self.assertEqual(len(pngs), 1, ex.displays)
            data = pngs[0].png_bytes()
            assert data is not None
            self.assertTrue(data.startswith(PNG_SIGNATURE))
            self.assertEqual(base64.b64decode(pngs[0].png or ""), data)
            self.assertEqual(pngs[0]._repr_png_(), data)
            self.assertIn("png", pngs[0].formats())

    def test_readme_example(self) -> None:
        with Sandbox.session() as s:
            s.run_code("import matplotlib.pyplot as plt; x = [1, 3, 2]")
            png = s.run_code("plt.plot(x);").results[0].png  # the trailing ; leaves the chart alone
            self.assertTrue(base64.b64decode(png or "").startswith(PNG_SIGNATURE))

    def test_state_and_rich_results(self) -> None:
        with Sandbox.session() as s:
            s.run_code("x = 41")
            ex = s.run_code("x + 1")
            self.assertEqual(ex.text, "42")
            self.assertEqual(ex.kernel and ex.kernel["execution_count"], 2)
            df = s.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
            self.assertEqual(len(df.results), 1, df.displays)  # text/html and text/plain: one object
            r = df.results[0]
            self.assertIn("<table", r.html or "")
            self.assertIn("a  b", r.text or "")
            self.assertEqual(r._repr_html_(), r.html)
            js = s.run_code("const y = 20; y + 22", language="javascript")
            self.assertEqual(js.text, "42")

    def test_every_display_type_maps_to_its_attribute(self) -> None:
        # The kernel sends what the object offers; whichever of these types
        # the supervisor passes on must land in its attribute.
        code = (
            "class Rich:\n"
            "    def _repr_markdown_(self): return '**md**'\n"
            "    def _repr_latex_(self): return r'$x^2$'\n"
            "    def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>'\n"
            "    def _repr_json_(self): return {'k': [1, 2]}\n"
            "    def _repr_html_(self): return '<b>html</b>'\n"
            "display(Rich())\n"
        )
        with Sandbox.session() as s:
            ex = s.run_code(code)
            self.assertIsNone(ex.error)
            mimes = {d["mime"] for d in ex.displays}
            self.assertTrue({"text/html", "image/svg+xml", "application/json"} <= mimes, mimes)
            self.assertEqual(len(ex.results), 1, ex.displays)
            r = ex.results[0]
            want = {"text/html": ("html", "<b>html</b>"), "image/svg+xml": ("svg", '<svg xmlns="http://www.w3.org/2000/svg"></svg>'),
                    "application/json": ("json", {"k": [1, 2]}), "text/markdown": ("markdown", "**md**"),
                    "text/latex": ("latex", "$x^2$")}
            for mime, (attr, value) in want.items():
                if mime in mimes:
                    self.assertEqual(getattr(r, attr), value, mime)
            bundle = r._repr_mimebundle_()
            self.assertEqual(set(bundle), mimes)

    def test_session_callbacks_and_timeout(self) -> None:
        with Sandbox.session() as s:
            out: List[str] = []
            results: List[Result] = []
            ex = s.run_code("import matplotlib.pyplot as plt\nprint('drawing')\nplt.plot([1, 2])",
                            on_stdout=lambda m: out.append(m.line), on_result=results.append)
            self.assertEqual("".join(out), "drawing\n")  # print may write the text and the newline apart
            # The figure (PNG) and the last expression's value (a list of lines, text).
            pngs = [r for r in results if r.png is not None]
            self.assertEqual(len(pngs), 1, [r.formats() for r in results])
            self.assertTrue((pngs[0].png_bytes() or b"").startswith(PNG_SIGNATURE))
            self.assertEqual(sorted(f for r in ex.results for f in r.formats()), sorted(f for r in results for f in r.formats()))
            with self.assertRaises(Timeout) as cm:
                s.run_code("import time\ntime.sleep(30)", timeout=1)
            self.assertTrue(cm.exception.execution.timed_out)
            after = s.run_code("print('alive')")
            self.assertEqual(after.stdout, "alive\n")
            self.assertTrue(after.kernel and after.kernel["restarted"])

    def test_files_round_trip_byte_exact(self) -> None:
        binary = bytes(range(256)) * 4096 + b"\x00\r\n\xff"
        with Sandbox.session() as s:
            info = s.files.write("data/blob.bin", binary)
            self.assertEqual((info.path, info.size, info.sha256), ("data/blob.bin", len(binary), hashlib.sha256(binary).hexdigest()))
            self.assertEqual(s.files.read("data/blob.bin", format="bytes"), binary)
            self.assertEqual(b"".join(s.files.read("data/blob.bin", format="stream")), binary)
            # Streamed uploads: a file object with a length, one without (chunked).
            s.files.write("chunked.bin", io.BytesIO(binary))
            self.assertEqual(s.files.read("chunked.bin", format="bytes"), binary)
            s.files.write("naïve name.txt", "héllo\n")
            self.assertEqual(s.files.read("naïve name.txt"), "héllo\n")
            # The code in the sandbox sees the same bytes, and what it writes comes back.
            ex = s.run_code("import hashlib; print(hashlib.sha256(open('data/blob.bin','rb').read()).hexdigest())\n"
                            "open('out.bin', 'wb').write(bytes(range(255, -1, -1)))")
            self.assertEqual(ex.stdout.strip(), hashlib.sha256(binary).hexdigest())
            self.assertEqual(s.files.read("out.bin", format="bytes"), bytes(range(255, -1, -1)))
            entries = {e.path: e for e in s.files.list()}
            self.assertEqual(entries["data"].type, "dir")
            self.assertEqual((entries["data/blob.bin"].type, entries["data/blob.bin"].size), ("file", len(binary)))
            self.assertEqual([e.name for e in s.files.list("data")], ["blob.bin"])
            self.assertTrue(s.files.exists("out.bin"))
            s.files.remove("out.bin")
            self.assertFalse(s.files.exists("out.bin"))
            with self.assertRaises(NotFound):
                s.files.read("out.bin")

    def test_context_manager_deletes_the_session(self) -> None:
        sandbox = Sandbox()
        with sandbox.session(ttl=600, key="sdk-test") as s:
            self.assertEqual(s.info["ttl_seconds"], 600)
            self.assertIn(s.id, [x.id for x in sandbox.list_sessions()])
            self.assertEqual(sandbox.get_session(s.id).id, s.id)
            s.run_code("print(1)")
            kernel = s.restart_kernel("python")
            self.assertTrue(kernel["restarted"])
        with self.assertRaises(NotFound):
            sandbox.get_session(s.id)
        s.kill()  # already gone: not an error


class Remote(unittest.TestCase):
    def setUp(self) -> None:
        self.url = os.environ.get("SANDBOXD_TEST_URL", "")
        if not self.url:
            if os.environ.get("CI") == "true":
                self.fail("SANDBOXD_TEST_URL is not set")
            self.skipTest("SANDBOXD_TEST_URL is not set")
        self.key = os.environ["SANDBOXD_TEST_API_KEY"]
        self.ca = os.environ["SANDBOXD_TEST_CA_FILE"]

    def test_https_with_key_and_ca(self) -> None:
        sb = Sandbox(url=self.url, api_key=self.key, ca_file=self.ca)
        self.assertEqual(sb.run_code("print('over tls')").stdout, "over tls\n")
        with sb.session() as s:
            s.files.write("k.txt", b"key caller")
            self.assertEqual(s.run_code("print(open('k.txt').read())").stdout, "key caller\n")
            # A bodyless POST: over TCP it must still declare JSON.
            self.assertTrue(s.restart_kernel("python")["restarted"])
        self.assertTrue(sb.health()["ok"])

    def test_wrong_key_and_unknown_ca(self) -> None:
        with self.assertRaises(Unauthenticated) as cm:
            Sandbox(url=self.url, api_key="0" * 48, ca_file=self.ca).run_code("print(1)")
        self.assertEqual(cm.exception.status, 401)
        with self.assertRaises(ConnectionFailed) as cm2:
            Sandbox(url=self.url, api_key=self.key).run_code("print(1)")  # system roots do not know the test CA
        self.assertIn("TLS", str(cm2.exception))

    def test_environment_selects_the_url(self) -> None:
        old = dict(os.environ)
        try:
            os.environ.update({"SANDBOXD_URL": self.url, "SANDBOXD_API_KEY": self.key, "SANDBOXD_CA_FILE": self.ca})
            self.assertEqual(Sandbox().run_code("print(2)").stdout, "2\n")
        finally:
            os.environ.clear()
            os.environ.update(old)


class Offline(unittest.TestCase):
    """What needs no supervisor: the grouping of displays, connection options."""

    def test_key_is_not_shown(self) -> None:
        key = "k" * 48
        sb = Sandbox(url="http://127.0.0.1:9", api_key=key)
        self.assertNotIn(key[:16], repr(sb) + str(sb) + repr(sb._transport))
        self.assertIn("127.0.0.1:9", repr(sb))

    def test_bad_connection_options(self) -> None:
        for kwargs, want in [({"url": "ftp://h:1"}, "want http://HOST:PORT"), ({"url": "http://h:1", "ca_file": "/ca.pem"}, "not https"),
                             ({"url": "http://h:1", "api_key": "a\nb"}, "line break"), ({"socket": "/s", "ca_file": "/ca.pem"}, "need a url")]:
            with self.assertRaisesRegex(ValueError, want):
                Sandbox(**kwargs)  # type: ignore[arg-type]

    def test_grouping(self) -> None:
        png = {"mime": "image/png", "data_base64": base64.b64encode(PNG_SIGNATURE).decode()}
        html = {"mime": "text/html", "data": "<table/>"}
        plain = {"mime": "text/plain", "data": "df"}
        svg = {"mime": "image/svg+xml", "data": "<svg/>"}
        jpeg = {"mime": "image/jpeg", "data_base64": "AA=="}
        groups = sandboxd.models.group_displays([png, png, html, plain, plain, jpeg, svg, html, png, jpeg])
        self.assertEqual([r.formats() for r in groups],
                         [["png"], ["png"], ["text", "html"], ["text"], ["jpeg"], ["html", "svg"], ["png", "jpeg"]])
        self.assertEqual(groups[4]._repr_jpeg_(), b"\x00")
        # Types in any order group as one object, up to its text/plain.
        md, latex = {"mime": "text/markdown", "data": "**x**"}, {"mime": "text/latex", "data": "$x$"}
        self.assertEqual([r.formats() for r in sandboxd.models.group_displays([md, latex, svg, html, plain, latex, md])],
                         [["text", "html", "markdown", "latex", "svg"], ["markdown", "latex"]])


if __name__ == "__main__":
    unittest.main()
