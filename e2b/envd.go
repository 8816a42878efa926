package e2b

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// workspace is where sandboxd's files live, as the code sees them.
const workspace = "/workspace"

// homeAlias is E2B's home directory, taken as an alias of /workspace so
// that examples written for E2B find their files.
const homeAlias = "/home/user"

// serveEnvd answers envd's routes (port 49983): health, file download and
// upload, and the filesystem Connect RPCs.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { s.health(w, r, sb) })
	mux.HandleFunc("GET /files", func(w http.ResponseWriter, r *http.Request) { s.readFile(w, r, sb) })
	mux.HandleFunc("POST /files", func(w http.ResponseWriter, r *http.Request) { s.writeFiles(w, r, sb) })
	mux.HandleFunc("POST /filesystem.Filesystem/{method}", func(w http.ResponseWriter, r *http.Request) { s.filesystemRPC(w, r, sb) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/process.Process/") {
			err := unsupported("commands and processes (sandbox.commands, pty): run bash through runCode(code, {language: 'bash'})")
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+") {
				writeConnectStreamErr(w, err)
				return
			}
			writeConnectErr(w, err)
			return
		}
		s.writeErr(w, r, unsupported(r.Method+" "+r.URL.Path+" on port 49983"))
	})
	mux.ServeHTTP(w, r)
}

// workspacePath maps an E2B path to one relative to /workspace ("" is the
// workspace itself): relative paths, /workspace/... and /home/user/....
// The API checks the result again (no escape, no symlink).
func workspacePath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if strings.HasPrefix(p, "/") {
		rel, ok := "", false
		for _, root := range []string{workspace, homeAlias} {
			if p == root || strings.HasPrefix(p, root+"/") {
				rel, ok = strings.TrimPrefix(p, root), true
				break
			}
		}
		if !ok {
			return "", errorf(http.StatusBadRequest, "path %q is outside the sandbox's workspace: sandboxd serves /workspace (and /home/user as its alias)", p)
		}
		p = strings.TrimPrefix(rel, "/")
	}
	c := path.Clean(p)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errorf(http.StatusBadRequest, "path %q climbs out of the workspace", p)
	}
	return c, nil
}

// filePath is the API path of a workspace file.
func filePath(sb *sandbox, rel string) string {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return sessionPath(sb, "/files/", strings.Join(segs, "/"))
}

// health answers envd's /health: 204 while the session exists, 502 (E2B's
// "not running") once it is gone.
func (s *Server) health(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	res, err := s.call(r, sb.key, http.MethodGet, sessionPath(sb), nil, nil)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	switch res.status {
	case http.StatusOK:
		res.body.Close()
		w.WriteHeader(http.StatusNoContent)
	case http.StatusNotFound:
		res.body.Close()
		s.reg.remove(sb.id)
		s.writeErr(w, r, errorf(http.StatusBadGateway, "sandbox %q is gone", sb.id))
	default:
		s.writeErr(w, r, apiError(res))
	}
}

// readFile streams GET /v1/sessions/{id}/files/{path}.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	rel, err := workspacePath(r.URL.Query().Get("path"))
	if err == nil && rel == "" {
		err = errorf(http.StatusBadRequest, "path is a directory")
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	res, err := s.expect(r, sb.key, http.MethodGet, filePath(sb, rel), nil, nil, http.StatusOK)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	defer res.body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if cl := res.header.Get("Content-Length"); cl != "" {
		w.Header().Set("Content-Length", cl)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, res.body)
}

// entryInfo is what envd answers for a written file.
type entryInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// writeFiles uploads each file of a multipart body (or the raw body, for
// application/octet-stream) with PUT /v1/sessions/{id}/files/{path}.
func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if r.Header.Get("Content-Encoding") != "" {
		s.writeErr(w, r, unsupported("compressed uploads (gzip)"))
		return
	}
	query := r.URL.Query().Get("path")
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		info, err := s.putFile(r, sb, query, r.Body, r.ContentLength)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, []entryInfo{info})
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	out := []entryInfo{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF { //nolint:errorlint // NextPart returns io.EOF unwrapped
			break
		}
		if err != nil {
			s.writeErr(w, r, errorf(http.StatusBadRequest, "bad multipart body: %v", err))
			return
		}
		name := query
		if name == "" {
			// FileName() would keep the last element only; the SDK puts the
			// whole path there when it writes several files.
			_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			name = dp["filename"]
		}
		info, err := s.putFile(r, sb, name, part, -1)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		out = append(out, info)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) putFile(r *http.Request, sb *sandbox, name string, body io.Reader, size int64) (entryInfo, error) {
	rel, err := workspacePath(name)
	if err == nil && rel == "" {
		err = errorf(http.StatusBadRequest, "a file path is required")
	}
	if err != nil {
		return entryInfo{}, err
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	res, err := s.expect(r, sb.key, http.MethodPut, filePath(sb, rel), withLength{body, size}, hdr, http.StatusCreated)
	if err != nil {
		return entryInfo{}, err
	}
	res.body.Close()
	return entryInfo{Name: path.Base(rel), Type: "file", Path: workspace + "/" + rel}, nil
}

// withLength is a body whose length may be known (-1: not).
type withLength struct {
	io.Reader
	n int64
}

// filesystemRPC answers the Connect RPCs of envd's filesystem service that
// map onto the files API; the SDK speaks Connect's JSON encoding.
func (s *Server) filesystemRPC(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Path  string `json:"path"`
		Depth int    `json:"depth"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxControlBody)).Decode(&req); err != nil {
		writeConnectErr(w, errorf(http.StatusBadRequest, "bad request (sandboxd speaks Connect's JSON encoding only): %v", err))
		return
	}
	rel, err := workspacePath(req.Path)
	if err != nil {
		writeConnectErr(w, err)
		return
	}
	var out any
	switch m := r.PathValue("method"); m {
	case "ListDir":
		out, err = s.listDir(r, sb, rel, max(req.Depth, 1))
	case "Stat":
		out, err = s.stat(r, sb, rel)
	case "Remove":
		out, err = s.remove(r, sb, rel)
	default:
		err = unsupported("filesystem." + m)
	}
	if err != nil {
		if e, ok := err.(*e2bError); ok { //nolint:errorlint // only this package's own errors, never wrapped
			s.forgetIfGone(r, e)
		}
		writeConnectErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
