// Package mcptest is a scripted MCP client for tests: it sends JSON-RPC
// 2.0 requests one per line and validates every answer's shape against the
// MCP schema (jsonrpc "2.0", the id echoed, exactly one of result and
// error, well-formed content items). It is for tests only; it must never
// be linked into a binary.
package mcptest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Client drives one MCP server over its stdin (w) and stdout (r).
type Client struct {
	w   io.Writer
	sc  *bufio.Scanner
	id  atomic.Int64
	Log func(format string, args ...any)
}

// New returns a client writing to w and reading from r.
func New(w io.Writer, r io.Reader) *Client {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return &Client{w: w, sc: sc, Log: func(string, ...any) {}}
}

// Error is a JSON-RPC error answer.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Notify sends a notification (no id; no answer expected).
func (c *Client) Notify(method string, params any) error {
	return c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func (c *Client) send(m map[string]any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.Log("-> %s", truncate(b))
	_, err = c.w.Write(append(b, '\n'))
	return err
}

func truncate(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

// Call sends a request and returns its result, or the *Error it got. The
// answer's shape is validated; a shape violation is a non-*Error error.
func (c *Client) Call(method string, params any, timeout time.Duration) (json.RawMessage, error) {
	id := c.id.Add(1)
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	if err := c.send(m); err != nil {
		return nil, err
	}
	type line struct {
		b   []byte
		err error
	}
	ch := make(chan line, 1)
	go func() {
		if c.sc.Scan() {
			ch <- line{b: append([]byte(nil), c.sc.Bytes()...)}
			return
		}
		err := c.sc.Err()
		if err == nil {
			err = io.EOF
		}
		ch <- line{err: err}
	}()
	var l line
	select {
	case l = <-ch:
	case <-time.After(timeout):
		return nil, fmt.Errorf("%s: no answer within %v", method, timeout)
	}
	if l.err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", method, l.err)
	}
	c.Log("<- %s", truncate(l.b))
	return CheckResponse(l.b, id)
}

// CheckResponse validates a JSON-RPC response to the request with id:
// exactly the members jsonrpc, id and one of result and error; jsonrpc
// "2.0"; id equal; error with an integer code and a message.
func CheckResponse(b []byte, id int64) (json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("answer is not a JSON object: %w", err)
	}
	for k := range raw {
		if k != "jsonrpc" && k != "id" && k != "result" && k != "error" {
			return nil, fmt.Errorf("answer has member %q", k)
		}
	}
	if string(raw["jsonrpc"]) != `"2.0"` {
		return nil, fmt.Errorf(`answer's jsonrpc is %s, not "2.0"`, raw["jsonrpc"])
	}
	var gotID int64
	if err := json.Unmarshal(raw["id"], &gotID); err != nil || gotID != id {
		return nil, fmt.Errorf("answer's id %s does not echo %d", raw["id"], id)
	}
	res, hasRes := raw["result"]
	e, hasErr := raw["error"]
	if hasRes == hasErr {
		return nil, fmt.Errorf("answer has result %v and error %v; want exactly one", hasRes, hasErr)
	}
	if hasErr {
		var rpcErr Error
		if err := json.Unmarshal(e, &rpcErr); err != nil || rpcErr.Message == "" {
			return nil, fmt.Errorf("malformed error %s", e)
		}
		return nil, &rpcErr
	}
	if len(res) == 0 || res[0] != '{' {
		return nil, fmt.Errorf("result %s is not an object", truncate(res))
	}
	return res, nil
}

// Content is one content item of a tool result.
type Content struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text,omitempty"`
	Data     string          `json:"data,omitempty"`
	MimeType string          `json:"mimeType,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
}

// ToolResult is a CallToolResult.
type ToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
}

// CheckToolResult decodes a tools/call result and validates its content:
// a non-empty content array whose items are text (with text), image (with
// base64 data and a mimeType) or resource (with a resource object).
func CheckToolResult(res json.RawMessage) (*ToolResult, error) {
	var r ToolResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("tool result: %w", err)
	}
	if len(r.Content) == 0 {
		return nil, fmt.Errorf("tool result has no content: %s", truncate(res))
	}
	for i, c := range r.Content {
		switch c.Type {
		case "text":
			if c.Text == nil {
				return nil, fmt.Errorf("content %d: text item without text", i)
			}
		case "image":
			if c.MimeType == "" {
				return nil, fmt.Errorf("content %d: image without mimeType", i)
			}
			if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil || c.Data == "" {
				return nil, fmt.Errorf("content %d: image data is not base64", i)
			}
		case "resource":
			var rr struct {
				URI string `json:"uri"`
			}
			if err := json.Unmarshal(c.Resource, &rr); err != nil || rr.URI == "" {
				return nil, fmt.Errorf("content %d: resource without uri", i)
			}
		default:
			return nil, fmt.Errorf("content %d: unknown type %q", i, c.Type)
		}
	}
	if len(r.StructuredContent) > 0 && r.StructuredContent[0] != '{' {
		return nil, fmt.Errorf("structuredContent is not an object")
	}
	return &r, nil
}

// Text is the concatenated text items.
func (r *ToolResult) Text() string {
	s := ""
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != nil {
			s += *c.Text
		}
	}
	return s
}
