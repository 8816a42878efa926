package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sandboxd/sandboxd/api"
)

// Settings is the live admin settings answer (api.Settings).
type Settings = api.Settings

// Settings reads the live admin settings (admin callers only).
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	return c.settings(ctx, http.MethodGet, nil)
}

// PatchSettings changes live admin settings: key to new value, a nil value
// resets the key to the operator's value. Values above their cap are
// refused (an *APIError, invalid_argument).
func (c *Client) PatchSettings(ctx context.Context, patch map[string]any) (*Settings, error) {
	b, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encode settings patch: %w", err)
	}
	return c.settings(ctx, http.MethodPatch, b)
}

func (c *Client) settings(ctx context.Context, method string, body []byte) (*Settings, error) {
	status, hdr, raw, err := c.do(ctx, method, api.AdminSettingsPath, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, answerError(status, hdr, raw)
	}
	var s Settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode settings answer: %w", err)
	}
	return &s, nil
}
