package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sandboxd/sandboxd/api"
)

// Environments lists the environments the supervisor offers.
func (c *Client) Environments(ctx context.Context) ([]api.Environment, error) {
	status, hdr, raw, err := c.do(ctx, http.MethodGet, "/v1/environments", nil)
	if err != nil {
		return nil, err
	}
	var l api.EnvironmentList
	if err := decodeAnswer(status, http.StatusOK, hdr, raw, &l); err != nil {
		return nil, err
	}
	return l.Environments, nil
}

// BuildEnvironment asks the supervisor to build an environment in a
// sandbox (admins only). The answer is the build exec's result; its
// artifact env.tar is the tree.
func (c *Client) BuildEnvironment(ctx context.Context, req api.EnvironmentBuildRequest) (*ExecResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode build request: %w", err)
	}
	status, hdr, raw, err := c.do(ctx, http.MethodPost, "/v1/environments/build", body)
	if err != nil {
		return nil, err
	}
	var res ExecResult
	if err := decodeAnswer(status, http.StatusOK, hdr, raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
