package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sandboxd/sandboxd/api"
)

// maxEventBytes bounds one line of a streamed exec (a display of a 20 MiB
// PNG, base64-encoded, fits; a result line holds up to maxAnswerBytes).
const maxEventBytes = maxAnswerBytes

// Event is one line of a streamed exec (API.md, Streaming): Type is
// "stdout", "stderr", "display", "result" or "error"; Raw is the whole line.
type Event struct {
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data,omitempty"`
	MIME    string          `json:"mime,omitempty"`
	DataB64 string          `json:"data_base64,omitempty"`
	Raw     []byte          `json:"-"`
}

// Text is a stdout/stderr event's text.
func (e Event) Text() string {
	var s string
	_ = json.Unmarshal(e.Data, &s)
	return s
}

// Display is a display event's display.
func (e Event) Display() api.Display {
	return api.Display{MIME: e.MIME, Data: e.Data, DataBase64: e.DataB64}
}

// ExecStream runs a one-shot exec streamed (Accept: application/x-ndjson),
// calling on for every event as it arrives, and returns the result line's
// result and its raw bytes. session "" is a one-shot exec. A refusal before
// the stream started is an *APIError, as for Exec; an error line after it
// is an *APIError too.
func (c *Client) ExecStream(ctx context.Context, session string, req ExecRequest, on func(Event)) (*ExecResult, []byte, error) {
	path := "/v1/exec"
	if session != "" {
		path = "/v1/sessions/" + url.PathEscape(session) + "/exec"
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode exec request: %w", err)
	}
	hr, err := c.newRequest(ctx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", api.NDJSONType)
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, nil, fmt.Errorf("POST %s via %s: %w", path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.NDJSONType {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		if resp.StatusCode == http.StatusOK { // a server without streaming
			var res ExecResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return nil, raw, fmt.Errorf("decode exec result: %w", err)
			}
			return &res, raw, nil
		}
		return nil, raw, answerError(resp.StatusCode, resp.Header, raw)
	}
	return readStream(resp, on)
}

func readStream(resp *http.Response, on func(Event)) (*ExecResult, []byte, error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	for sc.Scan() {
		line := sc.Bytes()
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, nil, fmt.Errorf("decode stream line: %w", err)
		}
		ev.Raw = append([]byte(nil), line...)
		switch ev.Type {
		case "result":
			var res ExecResult
			if err := json.Unmarshal(line, &res); err != nil {
				return nil, ev.Raw, fmt.Errorf("decode exec result: %w", err)
			}
			return &res, ev.Raw, nil
		case "error":
			return nil, ev.Raw, answerError(http.StatusInternalServerError, resp.Header, ev.Raw)
		}
		if on != nil {
			on(ev)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read stream: %w", err)
	}
	return nil, nil, fmt.Errorf("the stream ended without a result")
}
