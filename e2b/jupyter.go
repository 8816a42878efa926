package e2b

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// maxExecuteBody bounds an /execute request (the API applies its own code
// limit after this).
const maxExecuteBody = 8 << 20

// maxStreamLine bounds one NDJSON line of the API's exec stream (a display
// may be large; the kernel channel's frames are bounded at 32 MiB).
const maxStreamLine = 48 << 20

// serveJupyter answers the code interpreter's routes (port 49999).
func (s *Server) serveJupyter(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", func(w http.ResponseWriter, r *http.Request) { s.execute(w, r, sb) })
	mux.HandleFunc("POST /contexts", func(w http.ResponseWriter, r *http.Request) { s.createContext(w, r, sb) })
	mux.HandleFunc("GET /contexts", func(w http.ResponseWriter, r *http.Request) { s.listContexts(w, r, sb) })
	mux.HandleFunc("POST /contexts/{id}/restart", func(w http.ResponseWriter, r *http.Request) { s.restartContext(w, r, sb, false) })
	mux.HandleFunc("DELETE /contexts/{id}", func(w http.ResponseWriter, r *http.Request) { s.restartContext(w, r, sb, true) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeErr(w, r, unsupported(r.Method+" "+r.URL.Path+" on port 49999"))
	})
	mux.ServeHTTP(w, r)
}

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// language maps an E2B language (or context id) to sandboxd's.
func language(l string) (string, error) {
	switch strings.ToLower(l) {
	case "", "python", "python3":
		return "python", nil
	case "js", "javascript", "node", "nodejs":
		return "javascript", nil
	case "bash", "sh", "shell":
		return "shell", nil
	}
	return "", errorf(http.StatusBadRequest, "language %q is not supported: sandboxd runs python, javascript and bash", l)
}

// execRequest translates an /execute request into a session exec: the
// context's (or language's) kernel, the sandbox's env under the call's.
func execRequest(er executeRequest, sandboxEnv map[string]string) (map[string]any, error) {
	lang, err := language(er.Language)
	if er.ContextID != "" {
		if er.Language != "" {
			return nil, errorf(http.StatusBadRequest, "give context_id or language, not both")
		}
		lang, err = contextLanguage(er.ContextID)
	}
	if err != nil {
		return nil, err
	}
	env := maps.Clone(sandboxEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, er.EnvVars)
	body := map[string]any{"language": lang, "code": er.Code}
	if len(env) > 0 {
		body["env"] = env
	}
	if lang != "shell" {
		body["mode"] = "kernel"
	}
	return body, nil
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var er executeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxExecuteBody)).Decode(&er); err != nil {
		s.writeErr(w, r, errorf(http.StatusBadRequest, "bad request body: %v", err))
		return
	}
	body, err := execRequest(er, sb.envs)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	b, _ := json.Marshal(body)
	res, err := s.expect(r, sb.key, http.MethodPost, sessionPath(sb, "/exec"), bytes.NewReader(b),
		http.Header{"Content-Type": {"application/json"}, "Accept": {"application/x-ndjson"}}, http.StatusOK)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	defer res.body.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	out := newTranslator(func(line []byte) {
		_, _ = w.Write(line)
		_ = rc.Flush()
	})
	sc := bufio.NewScanner(res.body)
	sc.Buffer(make([]byte, 64<<10), maxStreamLine)
	for sc.Scan() {
		out.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		out.fail("StreamError", "the exec stream broke: "+err.Error())
	}
	out.end()
}

// contextLanguage is the language of a context id: sandboxd has one
// context per language, the session's kernel of it, named after it.
func contextLanguage(id string) (string, error) {
	lang, err := language(id)
	if err != nil || lang == "shell" || lang != id {
		return "", errorf(http.StatusNotFound, "context %q not found: sandboxd's contexts are \"python\" and \"javascript\"", id)
	}
	return lang, nil
}

// contextJSON is a context as the code interpreter shows it.
func contextJSON(lang string) map[string]any {
	return map[string]any{"id": lang, "language": lang, "cwd": "/workspace"}
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxControlBody)).Decode(&req); err != nil && err != io.EOF {
		s.writeErr(w, r, errorf(http.StatusBadRequest, "bad request body: %v", err))
		return
	}
	lang, err := language(req.Language)
	if err == nil && lang == "shell" {
		err = errorf(http.StatusBadRequest, "a bash context is not supported: bash runs as a fresh process each time")
	}
	if err == nil && req.Cwd != "" && req.Cwd != "/workspace" && req.Cwd != "/home/user" {
		err = unsupported("a context cwd other than /workspace")
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	sb.mu.Lock()
	sb.contexts[lang] = true
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, contextJSON(lang))
}

// listContexts lists the contexts created and the languages whose kernel
// runs (GET /v1/sessions/{id}), less those removed since.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var sess struct {
		Kernels []struct {
			Language string `json:"language"`
		} `json:"kernels"`
	}
	if err := s.getJSON(r, sb.key, sessionPath(sb), &sess); err != nil {
		s.writeErr(w, r, err)
		return
	}
	langs := map[string]bool{}
	for _, k := range sess.Kernels {
		langs[k.Language] = true
	}
	sb.mu.Lock()
	maps.Copy(langs, sb.contexts) // false: removed since
	sb.mu.Unlock()
	out := []map[string]any{}
	for _, l := range slices.Sorted(maps.Keys(langs)) {
		if langs[l] {
			out = append(out, contextJSON(l))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// restartContext restarts the context's kernel (POST
// /v1/sessions/{id}/kernels/{language}/restart); remove also takes it off
// the list. sandboxd cannot stop one kernel of a session, so removing a
// context drops its state the same way.
func (s *Server) restartContext(w http.ResponseWriter, r *http.Request, sb *sandbox, remove bool) {
	lang, err := contextLanguage(r.PathValue("id"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	if err := s.do(r, sb.key, http.MethodPost, sessionPath(sb, "/kernels/", lang, "/restart"), http.StatusOK); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if remove {
		sb.mu.Lock()
		sb.contexts[lang] = false
		sb.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}
