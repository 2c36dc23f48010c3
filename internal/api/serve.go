package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where the daemon listens unless told otherwise: loopback
// only, as the API has no authentication.
const DefaultAddr = "127.0.0.1:9191"

// shutdownTimeout bounds how long Serve waits for requests in flight when
// its context ends.
const shutdownTimeout = 5 * time.Second

// Serve listens on addr and serves h until ctx ends, then shuts down
// gracefully (requests in flight get 5 s). It returns nil after a clean
// shutdown, or an error naming addr when it cannot listen or serve.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", addr, err)
	}
	return serve(ctx, addr, ln, h, logger, defaultLimits)
}

// limits bound what one client can hold of the server: a client that
// sends its headers slowly is cut off after readHeader, one that sends a
// body slowly after read; an answer must be written within write; an idle
// keep-alive connection is closed after idle; headers above maxHeader
// bytes get 431.
type limits struct {
	readHeader, read, write, idle time.Duration
	maxHeader                     int
}

var defaultLimits = limits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	// A /metrics or /v1/workloads answer for 10,000 workloads is a few
	// MB; leave a slow scraper time to read it.
	write:     60 * time.Second,
	idle:      2 * time.Minute,
	maxHeader: 64 << 10,
}

// serve is Serve on a listener it closes; asked is the address as the
// operator gave it ("" for ln's own), named in the warning.
func serve(ctx context.Context, asked string, ln net.Listener, h http.Handler, logger *slog.Logger, lim limits) error {
	addr := ln.Addr().String()
	if asked == "" {
		asked = addr
	}
	if !isLoopback(ln.Addr()) {
		// 0.0.0.0:9191 binds as [::]:9191: name both.
		logger.Warn("api listens beyond loopback; it has no authentication, anyone who reaches it reads every workload's name and I/O",
			"addr", asked, "bound", addr)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.maxHeader,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	logger.Info("api listening", "addr", addr)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		// Serve never returns nil; ErrServerClosed cannot happen here as
		// nothing else shuts srv down.
		return fmt.Errorf("api: serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// Requests still running after the timeout: cut them off.
		_ = srv.Close()
		err = fmt.Errorf("api: shut down %s: %w", addr, err)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("api: serve on %s: %w", addr, serr)
	}
	if err == nil {
		logger.Info("api stopped", "addr", addr)
	}
	return err
}

// isLoopback reports whether a listener's address is reachable only from
// this host. 0.0.0.0 and :: (every interface) are not.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
