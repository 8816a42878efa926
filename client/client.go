// Package client speaks the sandboxd API (API.md) over the supervisor's Unix
// socket. It owns the client's copy of the wire types and the mapping of
// answers to Go errors: an API error body becomes an *APIError, anything
// else that goes wrong on the way is a plain wrapped error.
//
// It must never depend on the supervisor's packages (a client links against
// the contract, not the server), never decode answers strictly (a newer
// server may add fields), and never retry an exec on its own: a POST that
// failed halfway may have run.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// DefaultSocket is the supervisor's default socket (API.md).
const DefaultSocket = "/run/sandboxd/sandboxd.sock"

// maxAnswerBytes bounds an answer read into memory: outputs, artifacts
// (50 MiB in all, base64-encoded) and room to spare.
const maxAnswerBytes = 256 << 20

// Client is a connection factory for one supervisor socket. It is safe for
// concurrent use.
type Client struct {
	socket string
	http   *http.Client
}

// New returns a client for the socket at path.
func New(socket string) *Client {
	return &Client{
		socket: socket,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}},
	}
}

// ExecRequest is the body of POST /v1/exec.
type ExecRequest struct {
	Language  string            `json:"language"`
	Code      string            `json:"code"`
	Stdin     string            `json:"stdin,omitempty"`
	Files     []File            `json:"files,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMS *int64            `json:"timeout_ms,omitempty"`
	Artifacts []string          `json:"artifacts,omitempty"`
	Network   string            `json:"network,omitempty"`
}

// File is a file staged into the workspace.
type File struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
}

// ExecResult is the 200 answer of an exec.
type ExecResult struct {
	ID                 string          `json:"id"`
	ExitCode           *int            `json:"exit_code"`
	Signal             *string         `json:"signal"`
	TimedOut           bool            `json:"timed_out"`
	OOMKilled          bool            `json:"oom_killed"`
	QuotaExceeded      bool            `json:"quota_exceeded"`
	Stdout             string          `json:"stdout"`
	Stderr             string          `json:"stderr"`
	StdoutTruncated    bool            `json:"stdout_truncated"`
	StderrTruncated    bool            `json:"stderr_truncated"`
	DurationMS         int64           `json:"duration_ms"`
	Usage              Usage           `json:"usage"`
	Artifacts          []Artifact      `json:"artifacts"`
	ArtifactsTruncated bool            `json:"artifacts_truncated"`
	Policy             json.RawMessage `json:"policy"`
}

// Usage is the payload's resource usage.
type Usage struct {
	CPUMS    int64 `json:"cpu_ms"`
	MaxRSSKB int64 `json:"max_rss_kb"`
}

// Artifact is one collected output file.
type Artifact struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	ContentBase64 string `json:"content_base64"`
}

// Health is the answer of GET /v1/health, ready or not.
type Health struct {
	OK       bool              `json:"ok"`
	Version  string            `json:"version"`
	Checks   map[string]string `json:"checks"`
	Runtimes []string          `json:"runtimes"`
}

// APIError is a non-2xx answer with the API's error body.
type APIError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Exec runs one one-shot exec. It returns the result and the raw answer body
// (for callers that print it as is). A payload failure is a result, not an
// error; an API refusal is an *APIError.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (*ExecResult, []byte, error) {
	return c.exec(ctx, "/v1/exec", req)
}

// SessionExec runs an exec in a session's workspace.
func (c *Client) SessionExec(ctx context.Context, session string, req ExecRequest) (*ExecResult, []byte, error) {
	return c.exec(ctx, "/v1/sessions/"+url.PathEscape(session)+"/exec", req)
}

func (c *Client) exec(ctx context.Context, path string, req ExecRequest) (*ExecResult, []byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode exec request: %w", err)
	}
	status, hdr, raw, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, nil, err
	}
	if status != http.StatusOK {
		return nil, raw, answerError(status, hdr, raw)
	}
	var res ExecResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, raw, fmt.Errorf("decode exec result: %w", err)
	}
	return &res, raw, nil
}

// Health asks whether the host can sandbox. A 503 (not ready) still returns
// the health body and no error; check Health.OK.
func (c *Client) Health(ctx context.Context) (*Health, []byte, error) {
	status, hdr, raw, err := c.do(ctx, http.MethodGet, "/v1/health", nil)
	if err != nil {
		return nil, nil, err
	}
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return nil, raw, answerError(status, hdr, raw)
	}
	var h Health
	if err := json.Unmarshal(raw, &h); err != nil || h.Version == "" && h.Checks == nil {
		// A 503 from something that is not the health handler (a proxy,
		// an old server) has no health body; report what it said.
		if status == http.StatusServiceUnavailable {
			return nil, raw, answerError(status, hdr, raw)
		}
		return nil, raw, fmt.Errorf("decode health answer: %w", errors.Join(err, errors.New("not a health body")))
	}
	return &h, raw, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sandboxd"+path, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s %s via %s: %w", method, path, c.socket, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if len(raw) > maxAnswerBytes {
		return 0, nil, nil, fmt.Errorf("answer of %s %s is larger than %d bytes", method, path, maxAnswerBytes)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// answerError turns a non-2xx answer into an *APIError, or into a plain
// error when the body is not the API's error body (then it did not come from
// sandboxd, or came from a broken one).
func answerError(status int, hdr http.Header, raw []byte) error {
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
		snippet := strings.TrimSpace(string(raw))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return fmt.Errorf("unexpected answer: HTTP %d: %q", status, snippet)
	}
	return &APIError{Status: status, Code: eb.Error.Code, Message: eb.Error.Message, RetryAfter: hdr.Get("Retry-After")}
}
