package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

func TestNewClientAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:9191":         "http://127.0.0.1:9191",
		":9191":                  "http://127.0.0.1:9191",
		"http://[::1]:9191":      "http://[::1]:9191",
		"https://qos.example:1/": "https://qos.example:1/",
	} {
		c, err := NewClient(in)
		if err != nil || c.base.String() != want {
			t.Errorf("NewClient(%q) = %v, %v; want %s", in, c, err, want)
		}
	}
	for _, bad := range []string{"ftp://h:1", "http://", "%zz"} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("NewClient(%q): no error", bad)
		}
	}
}

// TestClientAgainstServer: the client against the real handler — the
// snapshot decodes, the filter reaches the server, a refused query is an
// *HTTPError carrying the server's message.
func TestClientAgainstServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(testHandler(t, fixture(), t0))
	defer srv.Close()
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := c.Workloads(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Workloads) < 2 {
		t.Fatalf("%d workloads, want the fixture's (at least 2)", len(all.Workloads))
	}
	one, err := c.Workloads(ctx, url.Values{"name": {all.Workloads[0].Name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Workloads) == 0 || len(one.Workloads) >= len(all.Workloads) {
		t.Errorf("name filter: %d of %d workloads", len(one.Workloads), len(all.Workloads))
	}
	_, err = c.Workloads(ctx, url.Values{"level": {"9"}})
	var he *HTTPError
	if !errors.As(err, &he) || he.Code != http.StatusBadRequest || he.Msg == "" {
		t.Errorf("level=9: %v, want a 400 HTTPError with a message", err)
	}
}
