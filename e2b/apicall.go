package e2b

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// response is an answer of the sandboxd API, its body streamed as the
// handler writes it.
type response struct {
	status int
	header http.Header
	body   io.ReadCloser
}

// call sends one request to the sandboxd API in-process and returns when the
// status is known; the body follows as the handler writes it and must be
// closed. The request carries the E2B request's context (its connection's
// TCP mark, its cancellation) and key as the bearer, so the API
// authenticates, limits and audits it as any --listen request.
func (s *Server) call(r *http.Request, key, method, path string, body io.Reader, hdr http.Header) (*response, error) {
	req, err := http.NewRequestWithContext(r.Context(), method, "http://sandboxd"+path, body)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if method == http.MethodPost && req.Header.Get("Content-Type") == "" {
		// The API refuses a POST on a TCP connection that is not declared
		// JSON, even an empty one (a web page could send it unannounced).
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr, req.TLS, req.Host = r.RemoteAddr, r.TLS, r.Host
	if body == nil {
		req.Body = http.NoBody
	}
	if wl, ok := body.(withLength); ok {
		req.ContentLength = wl.n // -1: unknown, read to EOF
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				// An aborted answer (http.ErrAbortHandler) ends the body
				// with an error rather than the process.
				w.start(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("sandboxd API aborted the answer: %v", v))
				return
			}
			w.start(http.StatusOK)
			_ = pw.Close()
		}()
		s.api.ServeHTTP(w, req)
	}()
	<-w.started
	return &response{status: w.status, header: w.header.Clone(), body: pr}, nil
}

// pipeWriter is the http.ResponseWriter of an in-process call: the status
// is handed over once, the body through a pipe.
type pipeWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	once    sync.Once
	status  int
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(code int) {
	w.once.Do(func() {
		w.status = code
		close(w.started)
	})
}

func (w *pipeWriter) WriteHeader(code int) { w.start(code) }

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	n, err := w.pw.Write(b)
	if err != nil {
		return n, fmt.Errorf("e2b: the reader went away: %w", err)
	}
	return n, nil
}

// Flush is a no-op (the pipe hands each write over at once); it lets the
// API's streaming code flush through http.ResponseController.
func (w *pipeWriter) Flush() {}

// maxAnswer bounds a JSON answer of the API that is decoded whole (the
// largest is a workspace listing).
const maxAnswer = 256 << 20

// expect is call for an answer of status; any other status is returned as
// the API's error, its body read and closed.
func (s *Server) expect(r *http.Request, key, method, path string, body io.Reader, hdr http.Header, status int) (*response, error) {
	res, err := s.call(r, key, method, path, body, hdr)
	if err != nil {
		return nil, err
	}
	if res.status != status {
		return nil, apiError(res)
	}
	return res, nil
}

// do is expect for an answer whose body is not needed.
func (s *Server) do(r *http.Request, key, method, path string, status int) error {
	res, err := s.expect(r, key, method, path, nil, nil, status)
	if err != nil {
		return err
	}
	return res.body.Close()
}

// getJSON decodes the 200 answer of GET path into v.
func (s *Server) getJSON(r *http.Request, key, path string, v any) error {
	res, err := s.expect(r, key, http.MethodGet, path, nil, nil, http.StatusOK)
	if err != nil {
		return err
	}
	defer res.body.Close()
	if err := json.NewDecoder(io.LimitReader(res.body, maxAnswer)).Decode(v); err != nil {
		return fmt.Errorf("decode the answer of GET %s: %w", path, err)
	}
	return nil
}
