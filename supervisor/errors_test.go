package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/workspace"
)

// TestClassCodes: every errdefs class has exactly one API code, with the
// status API.md gives it.
func TestClassCodes(t *testing.T) {
	tests := []struct {
		class  error
		code   api.ErrorCode
		status int
	}{
		{errdefs.ErrInvalid, api.CodeInvalidArgument, 400},
		{errdefs.ErrUnauthenticated, api.CodeUnauthenticated, 401},
		{errdefs.ErrForbidden, api.CodeForbidden, 403},
		{errdefs.ErrNotFound, api.CodeNotFound, 404},
		{errdefs.ErrConflict, api.CodeConflict, 409},
		{errdefs.ErrTooLarge, api.CodeTooLarge, 413},
		{errdefs.ErrQuota, api.CodeQuotaExceeded, 507},
		{errdefs.ErrResourceExhausted, api.CodeLimitExceeded, 429},
		{errdefs.ErrUnavailable, api.CodeUnavailable, 503},
		{errdefs.ErrInternal, api.CodeInternal, 500},
	}
	if len(classCodes) != len(tests) {
		t.Fatalf("classCodes has %d classes, the test %d", len(classCodes), len(tests))
	}
	for _, tc := range tests {
		e := toAPI(fmt.Errorf("context: %w", tc.class))
		if e.Code != tc.code || e.Status != tc.status {
			t.Errorf("%v: %s %d, want %s %d", tc.class, e.Code, e.Status, tc.code, tc.status)
		}
		if (e.RetryAfter > 0) != (tc.code == api.CodeLimitExceeded) {
			t.Errorf("%v: Retry-After %d", tc.class, e.RetryAfter)
		}
	}
	if e := toAPI(errors.New("boom")); e.Code != api.CodeInternal || e.Message != "boom" {
		t.Errorf("unclassified: %+v", e)
	}
}

// TestToAPIErrors: the package errors each land on their code, and the
// message is the reason with the fix rendered once, never the cause.
func TestToAPIErrors(t *testing.T) {
	cause := errors.New("EACCES on /var/lib/secret")
	tests := []struct {
		name string
		err  error
		code api.ErrorCode
		msg  string
	}{
		{"workspace too large", fmt.Errorf("workspace: put %q: more than 4 bytes: %w", "a", workspace.ErrTooLarge), api.CodeTooLarge, `workspace: put "a": more than 4 bytes: too large`},
		{"workspace escape", workspace.ErrNotRegular, api.CodeForbidden, "not a regular file"},
		{"workspace quota", workspace.ErrTreeTooLarge, api.CodeQuotaExceeded, "workspace tree exceeds the walk limits"},
		{"workspace invalid path", workspace.ErrInvalidPath, api.CodeInvalidArgument, "invalid path"},
		{"workspace not empty", workspace.ErrNotEmpty, api.CodeConflict, "directory not empty"},
		{"workspace not found", workspace.ErrNotFound, api.CodeNotFound, "no such file in the workspace"},
		{"session not found", session.ErrNotFound, api.CodeNotFound, "no such session"},
		{"session deleting", fmt.Errorf("use: %w", session.ErrDeleting), api.CodeConflict, "the session is being deleted"},
		{"too many sessions", session.ErrTooMany, api.CodeLimitExceeded, "the maximum number of sessions is reached; delete one or retry later"},
		{"fix, no cause", errdefs.New(errdefs.ErrUnavailable, "bwrap is missing", "apt-get install bubblewrap", cause), api.CodeUnavailable, "bwrap is missing; fix: apt-get install bubblewrap"},
		{"launch error", errdefs.New(errdefs.ErrQuota, "stage a: full", "", cause), api.CodeQuotaExceeded, "stage a: full"},
		{"launch error with fix", errdefs.New(errdefs.ErrUnavailable, "no helper", "make install", cause), api.CodeUnavailable, "no helper; fix: make install"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := toAPI(tc.err)
			if e.Code != tc.code || e.Message != tc.msg {
				t.Fatalf("got %s %q, want %s %q", e.Code, e.Message, tc.code, tc.msg)
			}
		})
	}
}

// TestFileErrorWords: the file API's words around the workspace's errors,
// with the class still deciding the code.
func TestFileErrorWords(t *testing.T) {
	tests := []struct {
		err  error
		code api.ErrorCode
		msg  string
	}{
		{fmt.Errorf("workspace: open %q: %w", "ln", workspace.ErrEscape), api.CodeForbidden, `the path escapes the session's workspace: workspace: open "ln": path escapes the workspace`},
		{fmt.Errorf("workspace: open %q: %w", "x", workspace.ErrNotFound), api.CodeNotFound, "no such file in the session's workspace"},
		{fmt.Errorf("workspace: put %q: %w", "big", workspace.ErrQuota), api.CodeQuotaExceeded, `the session's workspace disk quota is full: workspace: put "big": workspace quota exceeded`},
		{workspace.ErrNotEmpty, api.CodeConflict, "the directory is not empty; delete its files first"},
		{fmt.Errorf("workspace: put %q: %w", "big", workspace.ErrTooLarge), api.CodeTooLarge, `workspace: put "big": too large`},
		{errors.New("disk on fire"), api.CodeInternal, "disk on fire"},
	}
	for _, tc := range tests {
		if e := fileError(tc.err); e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("fileError(%v) = %s %q, want %s %q", tc.err, e.Code, e.Message, tc.code, tc.msg)
		}
	}
}

// lengthless hides the length of a body, so the client sends it chunked
// and only the workspace's own limit can stop it.
type lengthless struct{ io.Reader }

// TestWorkspaceTooLargeIs413OnBothPaths: a workspace ErrTooLarge is 413 for
// an upload and for a staged file of an exec alike. The staging path
// answered 400 before errors were mapped by class.
func TestWorkspaceTooLargeIs413OnBothPaths(t *testing.T) {
	const quota = 1024
	t.Run("upload", func(t *testing.T) {
		cfg := testConfig()
		cfg.WorkspaceQuotaBytes = quota
		st, err := session.Open(session.Config{StateDir: t.TempDir(), MaxSessions: 4, TTLDefault: 3600, TTLCap: 3600, SelfUID: os.Getuid(), QuotaBytes: quota})
		if err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, cfg, nil, readyChecks(), func(s *Server) { s.SetSessions(st) })
		sess, err := st.Create(launch.Caller{UID: os.Getuid(), GID: os.Getgid()}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("PUT", "http://sandboxd/v1/sessions/"+sess.ID+"/files/big", lengthless{strings.NewReader(strings.Repeat("x", 2*quota))})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, msg := apiError(t, response{status: resp.StatusCode, header: resp.Header, body: b})
		if resp.StatusCode != 413 || code != api.CodeTooLarge {
			t.Fatalf("upload past the limit: %d %s %q, want 413 too_large", resp.StatusCode, code, msg)
		}
	})
	t.Run("staged file", func(t *testing.T) {
		// The decide step lets the file through (the server's quota is
		// larger); the launcher's workspace refuses it while staging.
		hl, err := launch.New(launch.Config{HelperPath: "/nonexistent/sandboxd-nsinit", WorkspaceRoot: t.TempDir(), QuotaBytes: quota})
		if err != nil {
			t.Fatal(err)
		}
		fl := &fakeLauncher{fn: func(ctx context.Context, req launch.Request) (*launch.ExecResult, error) { return hl.Launch(ctx, req) }}
		ts := startServer(t, testConfig(), fl, readyChecks())
		body := fmt.Sprintf(`{"language":"python","code":"1","files":[{"path":"big","content_base64":"%s"}]}`,
			strings.Repeat("eHh4", 2*quota/3))
		r := ts.do("POST", "/v1/exec", body)
		code, msg := apiError(t, r)
		if r.status != 413 || code != api.CodeTooLarge || !strings.Contains(msg, "stage big") {
			t.Fatalf("staged file past the limit: %d %s %q, want 413 too_large", r.status, code, msg)
		}
	})
}
