package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

// filePath escapes each segment of a workspace path, keeping the slashes.
func filePath(id, p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return sessionPath(id) + "/files/" + strings.Join(segs, "/")
}

// decodeAnswer checks the status and decodes a JSON answer into v.
func decodeAnswer(status, want int, hdr http.Header, raw []byte, v any) error {
	if status != want {
		return answerError(status, hdr, raw)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// CreateSession creates a session; ttl nil means the server's default.
func (c *Client) CreateSession(ctx context.Context, ttl *int64, key string) (*Session, []byte, error) {
	body, err := json.Marshal(api.SessionCreateRequest{TTLSeconds: ttl, Key: key})
	if err != nil {
		return nil, nil, fmt.Errorf("encode session request: %w", err)
	}
	status, hdr, raw, err := c.do(ctx, http.MethodPost, "/v1/sessions", body)
	if err != nil {
		return nil, nil, err
	}
	var s Session
	return &s, raw, decodeAnswer(status, http.StatusCreated, hdr, raw, &s)
}

// ListSessions lists the caller's sessions.
func (c *Client) ListSessions(ctx context.Context) ([]Session, []byte, error) {
	status, hdr, raw, err := c.do(ctx, http.MethodGet, "/v1/sessions", nil)
	if err != nil {
		return nil, nil, err
	}
	var out api.SessionList
	return out.Sessions, raw, decodeAnswer(status, http.StatusOK, hdr, raw, &out)
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, id string) (*Session, []byte, error) {
	status, hdr, raw, err := c.do(ctx, http.MethodGet, sessionPath(id), nil)
	if err != nil {
		return nil, nil, err
	}
	var s Session
	return &s, raw, decodeAnswer(status, http.StatusOK, hdr, raw, &s)
}

// DeleteSession deletes a session (archiving it when it has a key).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	status, hdr, raw, err := c.do(ctx, http.MethodDelete, sessionPath(id), nil)
	if err != nil {
		return err
	}
	return decodeAnswer(status, http.StatusNoContent, hdr, raw, nil)
}

// ListFiles lists a session's workspace.
func (c *Client) ListFiles(ctx context.Context, id string) ([]FileInfo, []byte, error) {
	status, hdr, raw, err := c.do(ctx, http.MethodGet, sessionPath(id)+"/files", nil)
	if err != nil {
		return nil, nil, err
	}
	var out api.FileList
	return out.Files, raw, decodeAnswer(status, http.StatusOK, hdr, raw, &out)
}

// DeleteFile removes one file from a session's workspace.
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	status, hdr, raw, err := c.do(ctx, http.MethodDelete, filePath(id, path), nil)
	if err != nil {
		return err
	}
	return decodeAnswer(status, http.StatusNoContent, hdr, raw, nil)
}

// PutFile uploads body as path in a session's workspace, streaming it.
func (c *Client) PutFile(ctx context.Context, id, path string, body io.Reader, size int64) (*Uploaded, error) {
	req, err := c.newRequest(ctx, http.MethodPut, filePath(id, path), body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("PUT %s via %s: %w", path, c.socket, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var u Uploaded
	return &u, decodeAnswer(resp.StatusCode, http.StatusCreated, resp.Header, raw, &u)
}

// GetFile streams path of a session's workspace into w.
func (c *Client) GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	req, err := c.newRequest(ctx, http.MethodGet, filePath(id, path), nil)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s via %s: %w", path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, answerError(resp.StatusCode, resp.Header, raw)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("GET %s: got %d bytes, the answer announced %d", path, n, resp.ContentLength)
	}
	return n, err
}
