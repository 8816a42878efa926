// Package client speaks the sandboxd API (docs/API.md) over the
// supervisor's Unix socket, or over TCP (HTTP or HTTPS) with a bearer API
// key (NewRemote). It owns the mapping of answers to Go errors: an
// API error body becomes an *APIError, anything else that goes wrong on the
// way is a plain wrapped error. The wire types are package api's; the names
// here are aliases of them, kept so that callers of this package compile.
//
// It must never depend on the supervisor's packages (a client links against
// the contract, package api, not the server), never decode answers strictly
// (a newer server may add fields), and never retry an exec on its own: a
// POST that failed halfway may have run.
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

	"github.com/sandboxd/sandboxd/api"
)

// DefaultSocket is the supervisor's default socket (API.md).
const DefaultSocket = api.DefaultSocket

// maxAnswerBytes bounds an answer read into memory: outputs, artifacts
// (50 MiB in all, base64-encoded) and room to spare.
const maxAnswerBytes = 256 << 20

// Client is a connection factory for one supervisor socket. It is safe for
// concurrent use.
type Client struct {
	socket string // where, for error messages: the socket path or the URL
	base   string // scheme://host of every request
	key    string // API key sent as a bearer token; "" over the socket
	http   *http.Client
}

// New returns a client for the socket at path.
func New(socket string) *Client {
	return &Client{
		socket: socket,
		base:   "http://sandboxd",
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}},
	}
}

// The wire types, as package api defines them.
type (
	ExecRequest = api.ExecRequest
	File        = api.ExecFile
	ExecResult  = api.ExecResult
	Usage       = api.Usage
	Artifact    = api.Artifact
	Health      = api.Health
	Session     = api.Session
	FileInfo    = api.FileInfo
	Uploaded    = api.Uploaded
)

// APIError is a non-2xx answer with the API's error body.
type APIError struct {
	Status     int
	Code       api.ErrorCode
	Message    string
	RetryAfter string
}

func (e *APIError) Error() string { return string(e.Code) + ": " + e.Message }

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
	if err := json.Unmarshal(raw, &h); err != nil || h.Version == "" && h.Checks == (api.HealthChecks{}) {
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
	req, err := c.newRequest(ctx, method, path, rd)
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
	var eb api.ErrorBody
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
		snippet := strings.TrimSpace(string(raw))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return fmt.Errorf("unexpected answer: HTTP %d: %q", status, snippet)
	}
	return &APIError{Status: status, Code: eb.Error.Code, Message: eb.Error.Message, RetryAfter: hdr.Get(api.RetryAfterHeader)}
}
