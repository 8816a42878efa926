package supervisor

import (
	"net/http"
	"strings"
	"testing"
)

// TestMount: a mounted listener's requests go to its handler, never
// straight to the API; the handler reaches the API through Handler with
// the request's context, and the API authenticates those calls by key
// exactly as on --listen. The other listeners are unchanged.
func TestMount(t *testing.T) {
	fronted, err := ListenTCP([]string{"tcp://127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var srv *Server
	ts := startTCP(t, nil, func(s *Server) {
		srv = s
		s.Mount(fronted[0], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/front/panic" {
				panic("front handler bug")
			}
			if r.URL.Path != "/front/sessions" {
				w.WriteHeader(http.StatusTeapot)
				return
			}
			in := r.Clone(r.Context())
			in.URL.Path, in.RequestURI = "/v1/sessions", ""
			in.Header = http.Header{}
			if k := r.Header.Get("X-Key"); k != "" {
				in.Header.Set("Authorization", "Bearer "+k)
			}
			srv.Handler().ServeHTTP(w, in)
		}))
	})
	// startTCP served only its own listener; serve the fronted one too.
	go func() { _ = ts.srv.Serve(t.Context(), fronted[0]) }()
	url := "http://" + fronted[0].Addr().String()
	do := func(path, key string) int {
		r, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if key != "" {
			r.Header.Set("X-Key", key)
			r.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := ts.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/front/sessions", keyAlice, http.StatusOK},
		{"/front/sessions", "", http.StatusUnauthorized},
		{"/front/sessions", strings.Repeat("0", 48), http.StatusUnauthorized},
		{"/v1/sessions", keyAlice, http.StatusTeapot}, // the API itself is not served there
		{"/front/panic", "", http.StatusInternalServerError},
		{"/front/sessions", keyAlice, http.StatusOK}, // still serving after the panic
	} {
		if got := do(tc.path, tc.key); got != tc.want {
			t.Errorf("GET %s with key %q: %d; want %d", tc.path, tc.key, got, tc.want)
		}
	}
	if st, b, _ := ts.req(t, http.MethodGet, "/v1/sessions", "Bearer "+keyAlice, ""); st != http.StatusOK {
		t.Fatalf("the --listen listener: %d %s", st, b)
	}
}
