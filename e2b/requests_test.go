package e2b

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestExecRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   executeRequest
		env  map[string]string
		want string // JSON, or "error: <status>"
	}{
		{"default python kernel", executeRequest{Code: "1"}, nil, `{"code":"1","language":"python","mode":"kernel"}`},
		{"js", executeRequest{Code: "1", Language: "js"}, nil, `{"code":"1","language":"javascript","mode":"kernel"}`},
		{"context", executeRequest{Code: "1", ContextID: "javascript"}, nil, `{"code":"1","language":"javascript","mode":"kernel"}`},
		{"bash is a process exec", executeRequest{Code: "ls", Language: "bash"}, nil, `{"code":"ls","language":"shell"}`},
		{"env: the call's over the sandbox's", executeRequest{Code: "1", EnvVars: map[string]string{"A": "call", "B": "b"}},
			map[string]string{"A": "sandbox", "C": "c"}, `{"code":"1","env":{"A":"call","B":"b","C":"c"},"language":"python","mode":"kernel"}`},
		{"unknown language", executeRequest{Code: "1", Language: "r"}, nil, "error: 400"},
		{"unknown context", executeRequest{Code: "1", ContextID: "c-123"}, nil, "error: 404"},
		{"context and language", executeRequest{Code: "1", ContextID: "python", Language: "python"}, nil, "error: 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := execRequest(tc.in, tc.env)
			checkTranslation(t, got, err, tc.want)
		})
	}
}

func TestSessionRequest(t *testing.T) {
	n := func(i int) *int { return &i }
	yes := true
	for _, tc := range []struct {
		name string
		in   createRequest
		want string
	}{
		{"defaults", createRequest{TemplateID: defaultTemplate}, `{}`},
		{"timeout is the ttl", createRequest{Timeout: n(300)}, `{"ttl_seconds":300}`},
		{"a template is an environment", createRequest{TemplateID: "datasci"}, `{"environment":"datasci"}`},
		{"internet is egress", createRequest{AllowInternet: &yes}, `{"network":"egress"}`},
		{"zero timeout", createRequest{Timeout: n(0)}, "error: 400"},
		{"pause", createRequest{AutoPause: &yes}, "error: 501"},
		{"mcp", createRequest{MCP: json.RawMessage(`{"x":{}}`)}, "error: 501"},
		{"volumes", createRequest{VolumeMounts: json.RawMessage(`[]`)}, "error: 501"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sessionRequest(tc.in)
			checkTranslation(t, got, err, tc.want)
		})
	}
}

func checkTranslation(t *testing.T, got map[string]any, err error, want string) {
	t.Helper()
	if err != nil {
		e, ok := err.(*e2bError) //nolint:errorlint // the package's own error
		if !ok || "error: "+itoa(e.Status) != want {
			t.Fatalf("err %v; want %s", err, want)
		}
		return
	}
	b, _ := json.Marshal(got)
	if string(b) != want {
		t.Fatalf("got %s; want %s", b, want)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"/workspace", ""}, {"/home/user", ""}, {"/home/user/", ""},
		{"a.txt", "a.txt"}, {"/home/user/d/a.txt", "d/a.txt"}, {"/workspace/d/./a.txt", "d/a.txt"},
		{"d//a", "d/a"}, {"d/../a", "a"},
		{"/etc/passwd", "error"}, {"/home/username", "error"}, {"/workspacex/a", "error"},
		{"..", "error"}, {"../a", "error"}, {"/home/user/../x", "error"}, {"a/../../b", "error"},
	} {
		got, err := workspacePath(tc.in)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("workspacePath(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnderDir(t *testing.T) {
	files := []apiFile{{Path: "a", Mode: "-rw-------"}, {Path: "d", Mode: "drwx------"},
		{Path: "d/b", Mode: "-rw-------"}, {Path: "d/e", Mode: "drwx------"}, {Path: "d/e/c", Mode: "-rw-------"}, {Path: "dx", Mode: "-rw-------"}}
	paths := func(fs []apiFile) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	for _, tc := range []struct {
		dir   string
		depth int
		want  []string
		found bool
	}{
		{"", 1, []string{"a", "d", "dx"}, true},
		{"", 2, []string{"a", "d", "d/b", "d/e", "dx"}, true},
		{"d", 1, []string{"d/b", "d/e"}, true},
		{"d", 5, []string{"d/b", "d/e", "d/e/c"}, true},
		{"a", 1, []string{}, false},
		{"nope", 1, []string{}, false},
	} {
		got, found := underDir(files, tc.dir, tc.depth)
		if !reflect.DeepEqual(paths(got), tc.want) || found != tc.found {
			t.Errorf("underDir(%q, %d) = %v, %v; want %v, %v", tc.dir, tc.depth, paths(got), found, tc.want, tc.found)
		}
	}
}

func TestConnectEntry(t *testing.T) {
	e := connectEntry(apiFile{Path: "d/x.txt", Size: 8, Mode: "-rw-r-----", ModifiedAt: "2026-01-01T00:00:00Z"})
	if e["name"] != "x.txt" || e["type"] != fileTypeFile || e["path"] != "/workspace/d/x.txt" || e["mode"] != uint32(0o640) || e["size"] != int64(8) {
		t.Fatalf("file entry %v", e)
	}
	d := connectEntry(apiFile{Path: "d", Mode: "drwx------"})
	if d["type"] != fileTypeDir || d["mode"] != uint32(1<<31|0o700) {
		t.Fatalf("dir entry %v", d)
	}
	if l := connectEntry(apiFile{Path: "l", Mode: "Lrwxrwxrwx"}); l["type"] != fileTypeSymlink {
		t.Fatalf("symlink entry %v", l)
	}
}

func TestTokenOK(t *testing.T) {
	tok, sum, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{token: tok, tokenSum: sum}
	for _, tc := range []struct {
		tok  string
		want bool
	}{{tok, true}, {"", false}, {tok[:63], false}, {tok + "0", false}, {"x" + tok[1:], false}} {
		if got := sb.tokenOK(tc.tok); got != tc.want {
			t.Errorf("tokenOK(%q) = %v", tc.tok, got)
		}
	}
	// An empty token never matches, even a sandbox whose token is empty.
	if (&sandbox{}).tokenOK("") {
		t.Error("the empty token matched")
	}
}
