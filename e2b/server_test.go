package e2b

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// stubAPI stands in for the supervisor's handler in these unit tests (the
// real one is driven by integration/TestE2BOfficialSDK): it records what
// reached it and answers like the API.
type stubAPI struct {
	mu   sync.Mutex
	seen []string // "METHOD path bearer body"
	gone bool     // every session is gone
}

const stubSession = "0123456789abcdef0123456789abcdef"

func (a *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Authorization")+" "+string(b))
	a.mu.Unlock()
	switch {
	case a.gone:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such session"}}`)
	case r.Header.Get("Authorization") == "Bearer admin" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"id":"`+stubSession+`","expires_at":"2026-01-01T00:00:00Z"}`)
	case r.Header.Get("Authorization") != "Bearer k1":
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"unauthenticated","message":"bad key"}}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/"+stubSession:
		_, _ = io.WriteString(w, `{"id":"`+stubSession+`","expires_at":"2026-01-01T00:00:00Z"}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"`+stubSession+`"}`)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/exec"):
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"type":"stdout","data":"hi\n"}`+"\n"+`{"type":"result","kernel":{"execution_count":1}}`+"\n")
	case r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such session"}}`)
	}
}

func (a *stubAPI) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func do(t *testing.T, h http.Handler, method, path string, hdr map[string]string, body io.Reader) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, body)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return w, m
}

func TestServerRoutes(t *testing.T) {
	api := &stubAPI{}
	s := New(api, nil)
	// A wrong key: the API's refusal, with its status.
	w, m := do(t, s, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": "k2"}, strings.NewReader(`{}`))
	if w.Code != 401 || !strings.Contains(m["message"].(string), "unauthenticated") {
		t.Fatalf("wrong key: %d %v", w.Code, m)
	}
	w, m = do(t, s, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": "k1"}, strings.NewReader(`{"templateID":"code-interpreter-v1","timeout":300}`))
	if w.Code != 201 || m["sandboxID"] != stubSession || m["envdAccessToken"] == "" || m["envdAccessToken"] != m["trafficAccessToken"] {
		t.Fatalf("create: %d %v", w.Code, m)
	}
	tok := m["envdAccessToken"].(string)
	sbx := func(port, tok string) map[string]string {
		return map[string]string{"E2b-Sandbox-Id": stubSession, "E2b-Sandbox-Port": port, "X-Access-Token": tok}
	}
	before := len(api.calls())
	for _, bad := range []string{"", "x", tok[:len(tok)-1]} {
		if w, _ := do(t, s, "POST", "/execute", sbx(portJupyter, bad), strings.NewReader(`{"code":"1"}`)); w.Code != 401 {
			t.Fatalf("token %q: %d", bad, w.Code)
		}
	}
	if h := map[string]string{"E2b-Sandbox-Id": "ffffffffffffffffffffffffffffffff", "E2b-Sandbox-Port": portJupyter, "X-Access-Token": tok}; true {
		if w, _ := do(t, s, "POST", "/execute", h, strings.NewReader(`{"code":"1"}`)); w.Code != 502 {
			t.Fatalf("another sandbox id with this token: %d", w.Code)
		}
	}
	if n := len(api.calls()); n != before {
		t.Fatalf("refused sandbox requests reached the API: %v", api.calls()[before:])
	}
	w, _ = do(t, s, "POST", "/execute", sbx(portJupyter, tok), strings.NewReader(`{"code":"print('hi')"}`))
	if w.Code != 200 || w.Body.String() != `{"text":"hi\n","type":"stdout"}`+"\n"+`{"execution_count":1,"type":"number_of_executions"}`+"\n"+`{"type":"end_of_execution"}`+"\n" {
		t.Fatalf("execute: %d %q", w.Code, w.Body.String())
	}
	// The traffic token stands in on the context routes.
	w, m = do(t, s, "POST", "/contexts", map[string]string{"E2b-Sandbox-Id": stubSession, "E2b-Sandbox-Port": portJupyter, "E2b-Traffic-Access-Token": tok}, strings.NewReader(`{"language":"python"}`))
	if w.Code != 200 || m["id"] != "python" {
		t.Fatalf("context: %d %v", w.Code, m)
	}
	// A multipart upload with a nested path, escaped for the API.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "/home/user/a dir/f.txt")
	_, _ = fw.Write([]byte("data"))
	_ = mw.Close()
	h := sbx(portEnvd, tok)
	h["Content-Type"] = mw.FormDataContentType()
	w, _ = do(t, s, "POST", "/files", h, &body)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"path":"/workspace/a dir/f.txt"`) {
		t.Fatalf("upload: %d %s", w.Code, w.Body.String())
	}
	if w, _ = do(t, s, "GET", "/files?path=/etc/passwd", sbx(portEnvd, tok), nil); w.Code != 400 {
		t.Fatalf("a path outside the workspace: %d", w.Code)
	}
	if w, _ = do(t, s, "POST", "/process.Process/Start", sbx(portEnvd, tok), strings.NewReader(`{}`)); w.Code != 501 {
		t.Fatalf("commands: %d", w.Code)
	}
	h = sbx(portEnvd, tok)
	h["Content-Type"] = "application/connect+json"
	if w, _ = do(t, s, "POST", "/process.Process/Start", h, strings.NewReader(`{}`)); w.Code != 200 ||
		w.Body.Bytes()[0] != 0x02 || !strings.Contains(w.Body.String(), `{"error":{"code":"unimplemented","message":"sandboxd's E2B endpoint does not support commands`) {
		t.Fatalf("commands, streamed: %d %q", w.Code, w.Body.String())
	}
	// Connect gives the token to the creating key only, not to a key the
	// API lets see the session (an admin).
	if w, m = do(t, s, "POST", "/v2/sandboxes/"+stubSession+"/connect", map[string]string{"X-API-KEY": "k1"}, nil); w.Code != 200 || m["envdAccessToken"] != tok {
		t.Fatalf("connect: %d %v", w.Code, m)
	}
	if w, m = do(t, s, "POST", "/v2/sandboxes/"+stubSession+"/connect", map[string]string{"X-API-KEY": "admin"}, nil); w.Code != 403 || m["envdAccessToken"] != nil {
		t.Fatalf("connect by another key: %d %v", w.Code, m)
	}
	if w, m = do(t, s, "GET", "/sandboxes/"+stubSession, map[string]string{"X-API-KEY": "admin"}, nil); w.Code != 200 || m["envdAccessToken"] != nil || m["endAt"] != "2026-01-01T00:00:00Z" {
		t.Fatalf("info: %d %v", w.Code, m)
	}
	want := []string{
		"POST /v1/sessions Bearer k2 {}",
		`POST /v1/sessions Bearer k1 {"ttl_seconds":300}`,
		`POST /v1/sessions/` + stubSession + `/exec Bearer k1 {"code":"print('hi')","language":"python","mode":"kernel"}`,
		"PUT /v1/sessions/" + stubSession + "/files/a%20dir/f.txt Bearer k1 data",
		"GET /v1/sessions/" + stubSession + " Bearer k1 ",
		"GET /v1/sessions/" + stubSession + " Bearer admin ",
		"GET /v1/sessions/" + stubSession + " Bearer admin ",
	}
	if got := api.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("API calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A session the API no longer knows (reaped by its TTL) forgets its
	// sandbox: the next call is E2B's 502 "not found".
	api.gone = true
	if w, _ = do(t, s, "POST", "/filesystem.Filesystem/ListDir", sbx(portEnvd, tok), strings.NewReader(`{"path":"/home/user"}`)); w.Code != 404 {
		t.Fatalf("list in a reaped session: %d", w.Code)
	}
	if s.reg.get(stubSession) != nil {
		t.Fatal("the sandbox of a reaped session is still registered")
	}
	if w, _ = do(t, s, "POST", "/execute", sbx(portJupyter, tok), strings.NewReader(`{"code":"1"}`)); w.Code != 502 {
		t.Fatalf("execute in a forgotten sandbox: %d", w.Code)
	}
}

func TestServerKill(t *testing.T) {
	api := &stubAPI{}
	s := New(api, nil)
	w, m := do(t, s, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": "k1"}, strings.NewReader(`{}`))
	if w.Code != 201 {
		t.Fatalf("create: %d %v", w.Code, m)
	}
	tok := m["envdAccessToken"].(string)
	sbx := func(port, tok string) map[string]string {
		return map[string]string{"E2b-Sandbox-Id": stubSession, "E2b-Sandbox-Port": port, "X-Access-Token": tok}
	}
	if w, _ = do(t, s, "DELETE", "/sandboxes/..%2Fexec", map[string]string{"X-API-KEY": "k1"}, nil); w.Code != 404 {
		t.Fatalf("a bad sandbox id: %d", w.Code)
	}
	if w, _ = do(t, s, "DELETE", "/sandboxes/"+stubSession, map[string]string{"X-API-KEY": "k1"}, nil); w.Code != 204 {
		t.Fatalf("kill: %d", w.Code)
	}
	if w, _ = do(t, s, "GET", "/health", sbx(portEnvd, tok), nil); w.Code != 502 {
		t.Fatalf("health after kill: %d", w.Code)
	}
	want := []string{"POST /v1/sessions Bearer k1 {}", "DELETE /v1/sessions/" + stubSession + " Bearer k1 "}
	if got := api.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("API calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
