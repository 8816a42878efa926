package e2b

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"path"
	"strings"
)

// Connect's file types (envd's filesystem.FileType).
const (
	fileTypeFile    = 1
	fileTypeDir     = 2
	fileTypeSymlink = 3
)

// apiFile is an entry of GET /v1/sessions/{id}/files.
type apiFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	ModifiedAt string `json:"modified_at"`
}

// connectEntry renders an API entry as envd's EntryInfo (Connect JSON).
func connectEntry(f apiFile) map[string]any {
	typ := fileTypeFile
	switch {
	case strings.HasPrefix(f.Mode, "d"):
		typ = fileTypeDir
	case strings.HasPrefix(f.Mode, "L"):
		typ = fileTypeSymlink
	}
	perm := f.Mode
	if len(perm) > 9 {
		perm = perm[len(perm)-9:]
	}
	var mode uint32
	for i, c := range perm {
		if c != '-' {
			mode |= 1 << (8 - i)
		}
	}
	if typ == fileTypeDir {
		mode |= 1 << 31 // Go's fs.ModeDir, as envd reports it
	}
	return map[string]any{
		"name": path.Base(f.Path), "type": typ, "path": workspace + "/" + f.Path, "size": f.Size,
		"mode": mode, "permissions": f.Mode, "owner": "", "group": "", "modifiedTime": f.ModifiedAt,
	}
}

// listing fetches the whole workspace listing.
func (s *Server) listing(r *http.Request, sb *sandbox) ([]apiFile, error) {
	var l struct {
		Files []apiFile `json:"files"`
	}
	if err := s.getJSON(r, sb.key, sessionPath(sb, "/files"), &l); err != nil {
		return nil, err
	}
	return l.Files, nil
}

// underDir selects the entries below dir ("" is the workspace) at most
// depth levels down; found reports whether dir itself is a directory.
func underDir(files []apiFile, dir string, depth int) (out []apiFile, found bool) {
	found = dir == ""
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	for _, f := range files {
		if f.Path == dir && strings.HasPrefix(f.Mode, "d") {
			found = true
		}
		rest, ok := strings.CutPrefix(f.Path, prefix)
		if !ok || rest == "" || strings.Count(rest, "/") >= depth {
			continue
		}
		out = append(out, f)
	}
	return out, found
}

func (s *Server) listDir(r *http.Request, sb *sandbox, rel string, depth int) (any, error) {
	files, err := s.listing(r, sb)
	if err != nil {
		return nil, err
	}
	sel, found := underDir(files, rel, depth)
	if !found {
		return nil, errorf(http.StatusNotFound, "directory %q not found", workspace+"/"+rel)
	}
	entries := []map[string]any{}
	for _, f := range sel {
		entries = append(entries, connectEntry(f))
	}
	return map[string]any{"entries": entries}, nil
}

func (s *Server) stat(r *http.Request, sb *sandbox, rel string) (any, error) {
	if rel == "" {
		return map[string]any{"entry": connectEntry(apiFile{Path: "", Mode: "drwx------"})}, nil
	}
	files, err := s.listing(r, sb)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Path == rel {
			return map[string]any{"entry": connectEntry(f)}, nil
		}
	}
	return nil, errorf(http.StatusNotFound, "%q not found", workspace+"/"+rel)
}

func (s *Server) remove(r *http.Request, sb *sandbox, rel string) (any, error) {
	if rel == "" {
		return nil, errorf(http.StatusBadRequest, "the workspace itself cannot be removed")
	}
	if err := s.do(r, sb.key, http.MethodDelete, filePath(sb, rel), http.StatusNoContent); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// connectCodes maps HTTP statuses to Connect error codes.
var connectCodes = map[int]string{
	http.StatusBadRequest: "invalid_argument", http.StatusUnauthorized: "unauthenticated",
	http.StatusForbidden: "permission_denied", http.StatusNotFound: "not_found",
	http.StatusConflict: "aborted", http.StatusRequestEntityTooLarge: "resource_exhausted",
	http.StatusTooManyRequests: "resource_exhausted", http.StatusNotImplemented: "unimplemented",
	http.StatusServiceUnavailable: "unavailable", http.StatusInsufficientStorage: "resource_exhausted",
	http.StatusBadGateway: "unavailable",
}

// writeConnectStreamErr answers a Connect streaming call with an error: a
// 200 whose only message is the end-of-stream envelope (flags 0x02, a
// 4-byte big-endian length, then {"error": {"code", "message"}}), the one
// place the streaming protocol carries an error with its message.
func writeConnectStreamErr(w http.ResponseWriter, err error) {
	code, msg := connectError(err)
	payload, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	env := make([]byte, 5, 5+len(payload))
	env[0] = 0x02
	binary.BigEndian.PutUint32(env[1:], uint32(len(payload)))
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(env, payload...))
}

// connectError is err's Connect code and message.
func connectError(err error) (code, msg string) {
	e, ok := err.(*e2bError) //nolint:errorlint // only this package's own errors, never wrapped
	if !ok {
		e = errorf(http.StatusInternalServerError, "%v", err)
	}
	code, ok = connectCodes[e.Status]
	if !ok {
		code = "internal"
	}
	return code, e.Message
}

// writeConnectErr answers a Connect unary error: the code's HTTP status
// and {"code", "message"}.
func writeConnectErr(w http.ResponseWriter, err error) {
	code, msg := connectError(err)
	status := http.StatusInternalServerError
	if e, ok := err.(*e2bError); ok { //nolint:errorlint // only this package's own errors, never wrapped
		status = e.Status
	}
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}
