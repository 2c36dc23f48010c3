// Command pause is the static binary of the local pause image the real-kubelet
// groundwork imports into containerd (no registry here): it is the sandbox's
// infra process and, with the same image, a workload that only sleeps. It
// exits 0 on SIGTERM or SIGINT and reaps nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	os.Exit(0)
}
