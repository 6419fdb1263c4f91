package main

import (
	"os"
	"os/signal"
	"syscall"
)

// pause is the pod sandbox process (what registry.k8s.io/pause does): it holds the pod's
// namespaces, reaps the zombies re-parented to it as PID 1, and exits 0 on SIGTERM/SIGINT.
func pause() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reapChildren()
	}
}

// reapChildren collects every exited child without blocking.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
