// Package mcp is sandboxd's Model Context Protocol server: JSON-RPC 2.0 over
// a byte stream (stdio), one message per line, with the lifecycle methods
// (initialize, notifications/initialized, ping) and the tools capability
// (tools/list, tools/call). Its tools run code and manage sessions and
// files through a Backend, which is package client talking to sandboxd
// over its socket or a TCP listener like any other client.
//
// It owns the protocol and the tools' shapes only. It must never run code
// itself, never reach anything but its Backend, and never write to its
// output anything but whole JSON-RPC messages (a log line on stdout would
// break the client's framing: logs go to stderr).
package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ProtocolVersions are the MCP revisions this server speaks, newest first.
var ProtocolVersions = []string{"2025-06-18", "2025-03-26", "2024-11-05"}

// maxMessage bounds one line (an upload's base64 content travels in one).
const maxMessage = 64 << 20

// maxInFlight bounds the tool calls running at once.
const maxInFlight = 8

// maxAnswer bounds one message this server writes. The official TypeScript
// SDK's stdio client drops the connection when a line outgrows its 10 MiB
// read buffer, so an answer stays below that with room to spare; a tool
// result that would not is replaced by an error result that says so
// (ask for fewer artifacts or a smaller file).
const maxAnswer = 9 << 20

// DefaultDrainGrace is how long Serve lets running tool calls finish after
// its input ends (the client closed stdin) before it cancels them.
const DefaultDrainGrace = 30 * time.Second

// JSON-RPC 2.0 error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// Server answers one client.
type Server struct {
	backend Backend
	name    string
	version string
	log     *slog.Logger

	out      io.Writer
	outMu    sync.Mutex
	mu       sync.Mutex
	inflight map[string]context.CancelFunc // tools/call by id, for notifications/cancelled
	slots    chan struct{}
	wg       sync.WaitGroup

	// DrainGrace is how long Serve waits for running calls once its input
	// ends; then it cancels them. A client that closes stdin after sending
	// a call still gets that call's answer if it keeps reading.
	DrainGrace time.Duration
}

// New returns a server for backend; version is reported as serverInfo.version.
func New(backend Backend, version string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{backend: backend, name: "sandboxd", version: version, log: log,
		inflight: map[string]context.CancelFunc{}, slots: make(chan struct{}, maxInFlight), DrainGrace: DefaultDrainGrace}
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Serve reads messages from in and writes answers to out until in ends or
// ctx is done. When in ends, running tool calls get DrainGrace to finish
// and answer; when ctx is done they are cancelled at once. Serve returns
// only after every call has ended.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s.out = out
	ctx, cancel := context.WithCancel(ctx)
	defer s.drain(ctx, cancel)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	for sc.Scan() {
		line := sc.Bytes()
		if len(trimSpace(line)) == 0 {
			continue
		}
		s.handle(ctx, slices.Clone(line))
	}
	if err := sc.Err(); err != nil {
		// A line past maxMessage cannot be answered by id: the framing
		// is lost, so the session ends.
		s.write(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: codeParse, Message: "read: " + err.Error()}})
		return fmt.Errorf("mcp: read: %w", err)
	}
	return nil
}

// drain waits for the running calls, at most DrainGrace, then cancels what
// is left and waits for it to end.
func (s *Server) drain(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	timer := time.NewTimer(s.DrainGrace)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-ctx.Done():
	case <-timer.C:
		s.log.Warn("input ended; cancelling the tool calls still running after the grace period", "grace", s.DrainGrace)
	}
	cancel()
	<-done
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (s *Server) handle(ctx context.Context, line []byte) {
	if t := trimSpace(line); len(t) > 0 && t[0] == '[' {
		// Batches were removed from MCP in 2025-06-18.
		s.write(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest, Message: "batches are not supported"}})
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.write(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: codeParse, Message: "parse error: " + err.Error()}})
		return
	}
	isNotification := len(m.ID) == 0
	if !isNotification && !validID(m.ID) {
		s.write(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest, Message: "id must be a string or an integer"}})
		return
	}
	if m.JSONRPC != "2.0" || m.Method == "" {
		if m.Method == "" && (m.Result != nil || m.Error != nil) {
			return // a response to a request we never sent: ignore
		}
		if !isNotification {
			s.write(response{JSONRPC: "2.0", ID: m.ID, Error: &rpcError{Code: codeInvalidRequest, Message: `want "jsonrpc": "2.0" and a method`}})
		}
		return
	}
	if isNotification {
		s.notification(m)
		return
	}
	s.request(ctx, m)
}

func validID(id json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	switch x := v.(type) {
	case string:
		return true
	case float64:
		return x == float64(int64(x))
	}
	return false
}

func (s *Server) notification(m message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			s.mu.Lock()
			if c := s.inflight[string(p.RequestID)]; c != nil {
				c()
			}
			s.mu.Unlock()
		}
	default: // notifications/initialized and anything else: nothing to answer
	}
}

func (s *Server) request(ctx context.Context, m message) {
	switch m.Method {
	case "initialize":
		res, e := s.initialize(m.Params)
		s.reply(m.ID, res, e)
	case "ping":
		s.reply(m.ID, struct{}{}, nil)
	case "tools/list":
		s.reply(m.ID, map[string]any{"tools": toolList()}, nil)
	case "tools/call":
		s.call(ctx, m)
	default:
		s.reply(m.ID, nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + m.Method})
	}
}

func (s *Server) initialize(params json.RawMessage) (any, *rpcError) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "initialize: params.protocolVersion is required"}
	}
	// The client's version if this server speaks it, else this server's
	// newest; the client disconnects if it cannot speak that one.
	v := ProtocolVersions[0]
	if slices.Contains(ProtocolVersions, p.ProtocolVersion) {
		v = p.ProtocolVersion
	}
	return map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": s.name, "version": s.version},
		"instructions": "Runs Python and JavaScript in sandboxd's isolated sandboxes (no network, bounded CPU, memory and time). " +
			"Use run_code for one-off code; create_session for a workspace that persists files between runs.",
	}, nil
}

// call runs a tool in its own goroutine, so ping and other calls are
// answered meanwhile; at most maxInFlight run at once.
func (s *Server) call(ctx context.Context, m message) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		s.reply(m.ID, nil, &rpcError{Code: codeInvalidParams, Message: "tools/call: params.name is required"})
		return
	}
	t, ok := toolByName(p.Name)
	if !ok {
		s.reply(m.ID, nil, &rpcError{Code: codeInvalidParams, Message: "unknown tool: " + p.Name})
		return
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	key := string(m.ID)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		res := s.runTool(cctx, t, p.Arguments)
		if cctx.Err() != nil && ctx.Err() == nil {
			return // cancelled by the client: no answer (MCP cancellation)
		}
		s.reply(m.ID, res, nil)
	}()
}

func (s *Server) runTool(ctx context.Context, t tool, args json.RawMessage) (res *toolResult) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("tool panicked", "tool", t.Name, "panic", fmt.Sprint(v))
			res = errorResult(errors.New("internal error in the MCP server"))
		}
	}()
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	r, err := t.run(ctx, s.backend, args)
	if err != nil {
		return errorResult(err)
	}
	return r
}

func (s *Server) reply(id json.RawMessage, result any, e *rpcError) {
	if e != nil {
		s.write(response{JSONRPC: "2.0", ID: id, Error: e})
		return
	}
	if result == nil {
		result = struct{}{}
	}
	s.write(response{JSONRPC: "2.0", ID: id, Result: result})
}

func (s *Server) write(r response) {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(response{JSONRPC: "2.0", ID: r.ID, Error: &rpcError{Code: codeInternal, Message: "encode answer: " + err.Error()}})
	}
	if len(b) > maxAnswer {
		b = s.tooLarge(r, len(b))
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	// json.Marshal escapes control characters, so the line has no raw
	// newline inside: one message per line.
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		s.log.Error("write answer", "err", err)
	}
}

// tooLarge is the answer sent instead of one of size bytes: a tool result
// becomes an error result the model can act on, anything else an internal
// error (no other answer comes near the bound).
func (s *Server) tooLarge(r response, size int) []byte {
	msg := fmt.Sprintf("the answer would be %d bytes, more than the %d an MCP client reads in one message: ask for less "+
		"(fewer or smaller artifacts, a smaller file, or print less)", size, maxAnswer)
	s.log.Warn("answer too large, replaced", "bytes", size)
	var rr response
	if _, isTool := r.Result.(*toolResult); isTool {
		rr = response{JSONRPC: "2.0", ID: r.ID, Result: errorResult(errors.New(msg))}
	} else {
		rr = response{JSONRPC: "2.0", ID: r.ID, Error: &rpcError{Code: codeInternal, Message: msg}}
	}
	b, _ := json.Marshal(rr)
	return b
}
