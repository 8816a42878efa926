package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/sandboxd/sandboxd/api"
)

// Healthz asks GET /healthz (liveness, served without authentication) and
// returns the answer with the TLS state of the connection it came on (nil
// over plain HTTP or the socket). A connection or handshake failure is a
// wrapped *url.Error; a non-200 answer an *APIError or a plain error.
func (c *Client) Healthz(ctx context.Context) (*api.Liveness, *tls.ConnectionState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	resp, err := c.http.Do(req) // no key: /healthz must answer without one
	if err != nil {
		return nil, nil, fmt.Errorf("GET /healthz via %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, resp.TLS, fmt.Errorf("read answer of GET /healthz: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.TLS, answerError(resp.StatusCode, resp.Header, raw)
	}
	var l api.Liveness
	if err := json.Unmarshal(raw, &l); err != nil || !l.OK {
		return nil, resp.TLS, fmt.Errorf("GET /healthz: not a liveness answer: %.200q", raw)
	}
	return &l, resp.TLS, nil
}
