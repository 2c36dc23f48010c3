package host

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
)

func TestProbeEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ep, err := ParseDockerHost(hosttest.FakeEngine(t, dir, hosttest.Engine{Version: "20.10.24", APIVersion: "1.41", CgroupDriver: "cgroupfs", CgroupVersion: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	e := ProbeEngine(context.Background(), ep)
	want := Engine{Host: ep.Host, Reachable: true, Version: "20.10.24", APIVersion: "1.41", CgroupDriver: "cgroupfs", CgroupVersion: "1"}
	if e != want {
		t.Errorf("got %+v, want %+v", e, want)
	}
}

func TestProbeEngineErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ep, _ := ParseDockerHost("unix://" + filepath.Join(dir, "none.sock"))
	if e := ProbeEngine(context.Background(), ep); e.Reachable || !strings.Contains(e.Error, "none.sock") {
		t.Errorf("missing socket: %+v", e)
	}

	sock := filepath.Join(dir, "broken.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"Version":"1","ApiVersion":"1.41"}`)) })
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	ep, _ = ParseDockerHost("unix://" + sock)
	e := ProbeEngine(context.Background(), ep)
	if !e.Reachable || !strings.Contains(e.Error, "500") {
		t.Errorf("failing /info: %+v", e)
	}
}
