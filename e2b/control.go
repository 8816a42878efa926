package e2b

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// defaultTemplate is the code interpreter's template: sandboxd's default
// environment. Any other template names a sandboxd environment.
const defaultTemplate = "code-interpreter-v1"

// maxControlBody bounds a control API request body.
const maxControlBody = 1 << 20

// serveControl answers E2B's control API (X-API-KEY authenticated).
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("X-Api-Key")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", func(w http.ResponseWriter, r *http.Request) { s.create(w, r, key) })
	mux.HandleFunc("POST /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) { s.create(w, r, key) })
	mux.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) { s.info(w, r, key, false) })
	mux.HandleFunc("POST /sandboxes/{id}/connect", func(w http.ResponseWriter, r *http.Request) { s.info(w, r, key, true) })
	mux.HandleFunc("POST /v2/sandboxes/{id}/connect", func(w http.ResponseWriter, r *http.Request) { s.info(w, r, key, true) })
	mux.HandleFunc("DELETE /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) { s.kill(w, r, key) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeErr(w, r, unsupported(r.Method+" "+r.URL.Path))
	})
	mux.ServeHTTP(w, r)
}

// createRequest is the body of POST /sandboxes (and /v2/sandboxes).
type createRequest struct {
	TemplateID    string            `json:"templateID"`
	Timeout       *int              `json:"timeout"`
	EnvVars       map[string]string `json:"envVars"`
	Metadata      map[string]string `json:"metadata"`
	AllowInternet *bool             `json:"allow_internet_access"`
	AutoPause     *bool             `json:"autoPause"`
	MCP           json.RawMessage   `json:"mcp"`
	VolumeMounts  json.RawMessage   `json:"volumeMounts"`
	Network       json.RawMessage   `json:"network"`
}

// sessionRequest translates a create request into POST /v1/sessions.
func sessionRequest(cr createRequest) (map[string]any, error) {
	switch {
	case cr.AutoPause != nil && *cr.AutoPause:
		return nil, unsupported("pausing a sandbox (lifecycle.onTimeout: pause)")
	case len(cr.MCP) > 0 && string(cr.MCP) != "null":
		return nil, unsupported("the MCP gateway")
	case len(cr.VolumeMounts) > 0 && string(cr.VolumeMounts) != "null":
		return nil, unsupported("volume mounts")
	case len(cr.Network) > 0 && string(cr.Network) != "null":
		return nil, unsupported("network rules (sandboxd's egress is the operator's allowlist)")
	}
	body := map[string]any{}
	if cr.Timeout != nil {
		if *cr.Timeout < 1 {
			return nil, errorf(http.StatusBadRequest, "timeout %d: must be at least 1 second", *cr.Timeout)
		}
		body["ttl_seconds"] = *cr.Timeout
	}
	if cr.TemplateID != "" && cr.TemplateID != defaultTemplate && cr.TemplateID != "base" {
		body["environment"] = cr.TemplateID
	}
	if cr.AllowInternet != nil && *cr.AllowInternet {
		body["network"] = "egress"
	}
	return body, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, key string) {
	var cr createRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxControlBody))
	if err := dec.Decode(&cr); err != nil && err != io.EOF {
		s.writeErr(w, r, errorf(http.StatusBadRequest, "bad request body: %v", err))
		return
	}
	body, err := sessionRequest(cr)
	if err == nil {
		err = s.createSession(w, r, key, cr, body)
	}
	if err != nil {
		s.writeErr(w, r, err)
	}
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, key string, cr createRequest, body map[string]any) error {
	b, _ := json.Marshal(body)
	res, err := s.expect(r, key, http.MethodPost, "/v1/sessions", bytes.NewReader(b),
		http.Header{"Content-Type": {"application/json"}}, http.StatusCreated)
	if err != nil {
		return err
	}
	defer res.body.Close()
	var sess struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(res.body, maxControlBody)).Decode(&sess); err != nil || sess.ID == "" {
		return fmt.Errorf("decode the new session: %w", err)
	}
	tok, sum, err := newToken()
	if err != nil {
		return fmt.Errorf("access token: %w", err)
	}
	tmpl := cr.TemplateID
	if tmpl == "" {
		tmpl = defaultTemplate
	}
	sb := &sandbox{id: sess.ID, key: key, token: tok, tokenSum: sum, template: tmpl, envs: cr.EnvVars,
		metadata: cr.Metadata, started: time.Now().UTC(), contexts: map[string]bool{}}
	s.reg.add(sb)
	s.log.Info("e2b sandbox created", "sandbox_id", sb.id, "template", tmpl)
	writeJSON(w, http.StatusCreated, sandboxJSON(sb, true))
	return nil
}

// sandboxJSON is a sandbox as E2B's API shows it; withToken adds the
// access tokens (creation and connect only).
func sandboxJSON(sb *sandbox, withToken bool) map[string]any {
	m := map[string]any{
		"sandboxID": sb.id, "templateID": sb.template, "clientID": "sandboxd",
		"envdVersion": envdVersion, "state": "running", "startedAt": sb.started.Format(time.RFC3339Nano),
		"metadata": sb.metadata,
	}
	if withToken {
		m["envdAccessToken"] = sb.token
		m["trafficAccessToken"] = sb.token
	}
	return m
}

// info answers GET /sandboxes/{id} and connect: the session must exist for
// the presented key (the API checks), and the sandbox must be one this
// endpoint created. Connect returns the access token, which only the
// session's owner gets this far to see.
func (s *Server) info(w http.ResponseWriter, r *http.Request, key string, connect bool) {
	id := r.PathValue("id")
	if !validID(id) {
		s.writeErr(w, r, errorf(http.StatusNotFound, "sandbox %q not found", id))
		return
	}
	var sess struct {
		ExpiresAt string `json:"expires_at"`
	}
	if err := s.getJSON(r, key, "/v1/sessions/"+id, &sess); err != nil {
		s.writeErr(w, r, err)
		return
	}
	sb := s.reg.get(id)
	if sb == nil {
		s.writeErr(w, r, errorf(http.StatusNotFound, "session %s was not created through the E2B endpoint (or the supervisor restarted since)", id))
		return
	}
	if connect && !sb.createdBy(key) {
		// The token acts as the creating key: an admin key, which the
		// API lets see every session, must not obtain it and act (and be
		// audited) as another caller.
		s.writeErr(w, r, errorf(http.StatusForbidden, "only the key that created sandbox %s can connect to it", id))
		return
	}
	m := sandboxJSON(sb, connect)
	m["endAt"] = sess.ExpiresAt
	writeJSON(w, http.StatusOK, m)
}

// kill deletes the session (DELETE /v1/sessions/{id}) and forgets the
// sandbox.
func (s *Server) kill(w http.ResponseWriter, r *http.Request, key string) {
	id := r.PathValue("id")
	if !validID(id) {
		s.writeErr(w, r, errorf(http.StatusNotFound, "sandbox %q not found", id))
		return
	}
	if err := s.do(r, key, http.MethodDelete, "/v1/sessions/"+id, http.StatusNoContent); err != nil {
		s.writeErr(w, r, err)
		return
	}
	// The API deleted it for this key, so the key owned it.
	s.reg.remove(id)
	s.log.Info("e2b sandbox killed", "sandbox_id", id)
	w.WriteHeader(http.StatusNoContent)
}

// sessionPath is the API path of a sandbox's session, plus rest.
func sessionPath(sb *sandbox, rest ...string) string {
	return "/v1/sessions/" + sb.id + strings.Join(rest, "")
}

// validID reports whether id has the form of a session id (32 lowercase
// hex), so that no E2B id can reach another API path.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
