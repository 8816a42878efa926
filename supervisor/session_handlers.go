package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/workspace"
)

// SetSessions enables the session routes (without it they answer 404) and
// the sandboxd_active_sessions gauge.
func (s *Server) SetSessions(st *session.Store) {
	s.sessions = st
	s.metrics.sessions = st.Count
}

func (s *Server) sessionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/sessions", s.handleSessionCreate)
	mux.HandleFunc("GET /v1/sessions", s.handleSessionList)
	mux.Handle("/v1/sessions", methodNotAllowedHandler("GET, POST"))
	mux.HandleFunc("GET /v1/sessions/{id}", s.withSession(s.handleSessionGet))
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.handleSessionDelete)
	mux.Handle("/v1/sessions/{id}", methodNotAllowedHandler("GET, DELETE"))
	mux.HandleFunc("POST /v1/sessions/{id}/exec", s.withSession(func(w http.ResponseWriter, r *http.Request, sess *session.Session) {
		s.serveExec(w, r, sess)
	}))
	mux.Handle("/v1/sessions/{id}/exec", methodNotAllowedHandler("POST"))
	mux.HandleFunc("POST /v1/sessions/{id}/kernels/{language}/restart", s.withSession(s.handleKernelRestart))
	mux.Handle("/v1/sessions/{id}/kernels/{language}/restart", methodNotAllowedHandler("POST"))
	mux.HandleFunc("GET /v1/sessions/{id}/files", s.withSession(s.handleFileList))
	mux.Handle("/v1/sessions/{id}/files", methodNotAllowedHandler("GET"))
	mux.HandleFunc("PUT /v1/sessions/{id}/files/{path...}", s.withSession(s.handleFilePut))
	mux.HandleFunc("GET /v1/sessions/{id}/files/{path...}", s.withSession(s.handleFileGet))
	mux.HandleFunc("DELETE /v1/sessions/{id}/files/{path...}", s.withSession(s.handleFileDelete))
	mux.Handle("/v1/sessions/{id}/files/{path...}", methodNotAllowedHandler("GET, PUT, DELETE"))
}

// fileError gives the workspace's errors the words a caller of the file
// API needs; their class, not this function, decides the answer (toAPI).
func fileError(err error) *APIError {
	switch {
	case errors.Is(err, workspace.ErrEscape):
		err = fmt.Errorf("the path escapes the session's workspace: %w", err)
	case errors.Is(err, workspace.ErrNotFound):
		err = errdefs.New(errdefs.ErrNotFound, "no such file in the session's workspace", "", err)
	case errors.Is(err, workspace.ErrQuota):
		err = fmt.Errorf("the session's workspace disk quota is full: %w", err)
	case errors.Is(err, workspace.ErrNotEmpty):
		err = errdefs.New(errdefs.ErrConflict, "the directory is not empty; delete its files first", "", err)
	}
	return toAPI(err)
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, sess *session.Session)

// withSession resolves {id} for the caller (404 for another caller's).
func (s *Server) withSession(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.sessions == nil {
			writeError(w, apiErr(api.CodeNotFound, "sessions are not enabled on this supervisor"))
			return
		}
		caller, _ := callerFrom(r.Context())
		sess, err := s.sessions.Get(r.PathValue("id"), caller)
		if err != nil {
			writeError(w, toAPI(err))
			return
		}
		h(w, r, sess)
	}
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeError(w, apiErr(api.CodeNotFound, "sessions are not enabled on this supervisor"))
		return
	}
	caller, _ := callerFrom(r.Context())
	var req api.SessionCreateRequest
	body, apiE := readBody(w, r, s.cfg.MaxBodyBytes)
	if apiE == nil && len(body) > 0 {
		apiE = decodeStrict(body, &req)
	}
	if apiE == nil && len(req.Key) > api.MaxSessionKeyBytes {
		apiE = apiErr(api.CodeInvalidArgument, fmt.Sprintf("key is longer than %d bytes", api.MaxSessionKeyBytes))
	}
	network := ""
	if apiE == nil {
		var err error
		if network, err = policy.DecideNetwork(req.Network, caller, s.cfg); err != nil {
			apiE = toAPI(err)
		}
	}
	if apiE == nil {
		if err := policy.ValidateSessionEnvironment(req.Environment, s.cfg.Environments); err != nil {
			apiE = toAPI(err)
		}
	}
	if apiE != nil {
		writeError(w, apiE)
		return
	}
	sess, err := s.sessions.CreateNetwork(caller, req.TTLSeconds, req.Key, network)
	if err == nil {
		err = s.sessions.SetEnvironment(sess, req.Environment)
	}
	if err != nil {
		if codeOf(err) == api.CodeInternal {
			s.log.Error("create session", "err", err)
			err = fmt.Errorf("create session: %w", err)
		}
		writeError(w, toAPI(err))
		return
	}
	writeJSON(w, http.StatusCreated, s.sessions.View(sess))
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeJSON(w, http.StatusOK, api.SessionList{Sessions: []api.Session{}})
		return
	}
	caller, _ := callerFrom(r.Context())
	views := []api.Session{}
	for _, sess := range s.sessions.List(caller) {
		views = append(views, s.sessions.View(sess))
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: views})
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	writeJSON(w, http.StatusOK, s.sessions.View(sess))
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeError(w, apiErr(api.CodeNotFound, "sessions are not enabled on this supervisor"))
		return
	}
	caller, _ := callerFrom(r.Context())
	if err := s.sessions.Delete(r.PathValue("id"), caller, "delete"); err != nil {
		writeError(w, toAPI(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fileOp opens the session's workspace for one file operation, marking the
// session in use (409 while it is being deleted).
func (s *Server) fileOp(w http.ResponseWriter, sess *session.Session, op func(ws *workspace.Workspace) *APIError) {
	done, err := s.sessions.Use(sess)
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	defer done()
	ws, err := workspace.Open(s.sessions.WorkspaceDir(sess), s.cfg.WorkspaceQuotaBytes)
	if err != nil {
		writeError(w, apiErr(api.CodeInternal, "open the session's workspace: "+err.Error()))
		return
	}
	defer ws.Close()
	if apiE := op(ws); apiE != nil {
		writeError(w, apiE)
	}
}

// auditFile writes a file.put, file.get or file.delete record with facts
// f under the session's id (the code is added on a refusal).
func (s *Server) auditFile(r *http.Request, sessionID string, f facts.Coded, apiE *APIError) {
	caller, _ := callerFrom(r.Context())
	if err := s.writeAudit(s.record(sessionID, f.Step(), caller, apiE, f)); err != nil {
		s.log.Error("audit write failed", "step", f.Step(), "err", err)
	}
}

func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	p := r.PathValue("path")
	target := facts.FileTarget{SessionID: sess.ID, Path: p}
	max := s.cfg.WorkspaceQuotaBytes
	if r.ContentLength > max {
		drainOversized(r.Body)
		apiE := apiErr(api.CodeTooLarge, fmt.Sprintf("the upload is %d bytes; the limit is %d", r.ContentLength, max))
		s.auditFile(r, sess.ID, &facts.FilePut{FileTarget: target}, apiE)
		writeError(w, apiE)
		return
	}
	s.fileOp(w, sess, func(ws *workspace.Workspace) *APIError {
		size, sum, err := ws.Put(p, r.Body, max)
		if err != nil {
			// Let a client still writing its body read the answer.
			drainOversized(r.Body)
			apiE := fileError(err)
			s.auditFile(r, sess.ID, &facts.FilePut{FileTarget: target}, apiE)
			return apiE
		}
		s.auditFile(r, sess.ID, &facts.FilePut{FileTarget: target, Size: &size, SHA256: sum}, nil)
		writeJSON(w, http.StatusCreated, api.Uploaded{Path: p, Size: size, SHA256: sum})
		return nil
	})
}

func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	p := r.PathValue("path")
	target := facts.FileTarget{SessionID: sess.ID, Path: p}
	s.fileOp(w, sess, func(ws *workspace.Workspace) *APIError {
		f, info, err := ws.Open(p)
		if err != nil {
			apiE := fileError(err)
			s.auditFile(r, sess.ID, &facts.FileGet{FileTarget: target}, apiE)
			return apiE
		}
		defer f.Close()
		s.auditFile(r, sess.ID, &facts.FileGet{FileTarget: target, Size: &info.Size}, nil)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.WriteHeader(http.StatusOK)
		// Exactly the size fstat gave: a payload growing the file meanwhile
		// cannot make the answer longer than its header says.
		_, _ = io.CopyN(w, f, info.Size)
		return nil
	})
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	p := r.PathValue("path")
	target := facts.FileTarget{SessionID: sess.ID, Path: p}
	s.fileOp(w, sess, func(ws *workspace.Workspace) *APIError {
		if err := ws.Delete(p); err != nil {
			apiE := fileError(err)
			s.auditFile(r, sess.ID, &facts.FileDelete{FileTarget: target}, apiE)
			return apiE
		}
		s.auditFile(r, sess.ID, &facts.FileDelete{FileTarget: target}, nil)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	s.fileOp(w, sess, func(ws *workspace.Workspace) *APIError {
		files, err := ws.List()
		if err != nil {
			return fileError(err)
		}
		if files == nil {
			files = []api.FileInfo{}
		}
		writeJSON(w, http.StatusOK, api.FileList{Files: files})
		return nil
	})
}
