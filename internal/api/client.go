package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Client reads a running daemon's API. It is the one client of it:
// `ddiskqos status` and the tests use it.
type Client struct {
	base *url.URL
	hc   *http.Client
}

// NewClient makes a client of the daemon at addr: HOST:PORT, :PORT
// (loopback) or an http(s) URL — what `ddiskqos run --listen` was given.
func NewClient(addr string) (*Client, error) {
	s := addr
	if !strings.Contains(s, "://") {
		if strings.HasPrefix(s, ":") {
			s = "127.0.0.1" + s
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("want HOST:PORT or an http:// URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("no host: want HOST:PORT or an http:// URL")
	}
	return &Client{base: u, hc: http.DefaultClient}, nil
}

// HTTPError is an answer other than 200.
type HTTPError struct {
	Code int
	// Msg is the "error" of the JSON body, or the body, cut to 300 bytes.
	// It comes from whatever listens there: escape it before printing it
	// to a terminal.
	Msg string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

// WorkloadsJSON returns the daemon's snapshot as it sent it, filtered by q
// (level, name; see the server's workloads handler).
func (c *Client) WorkloadsJSON(ctx context.Context, q url.Values) ([]byte, error) {
	u := c.base.JoinPath(WorkloadsPath)
	u.RawQuery = q.Encode()
	return c.get(ctx, u.String())
}

// Workloads returns the daemon's snapshot, filtered by q.
func (c *Client) Workloads(ctx context.Context, q url.Values) (*snapshot.Snapshot, error) {
	body, err := c.WorkloadsJSON(ctx, q)
	if err != nil {
		return nil, err
	}
	var s snapshot.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("the answer of %s is not a ddiskqos snapshot: %w", c.base.Host, err)
	}
	return &s, nil
}

// get GETs u and returns the body of a 200 answer, else an *HTTPError.
func (c *Client) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return nil, &HTTPError{Code: resp.StatusCode, Msg: msg}
	}
	return body, nil
}
