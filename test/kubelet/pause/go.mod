// The pause image's one binary: sleeps until SIGTERM/SIGINT. Its own module,
// outside ddiskqos's. See ../README.md.
module github.com/ddiskqos/ddiskqos/test/kubelet/pause

go 1.24.0
