// Command model-server is omenative's test model server, and its pause (sandbox) process.
//
// It behaves the way the readiness, gang and drain logic of a real multi-node inference
// engine does, with no model: the real-node tests send traffic to it and compare what it
// answers with what omenative reports. Standard library only; built static by the shared
// builder (omenative_devcluster.components) and packed into OCI images by
// omenative_devcluster.images. docs/model-server.md lists its environment variables.
//
// Modes: `model-server pause` (or the binary called as `pause`) is the pod sandbox
// process; `model-server router FLAGS` is a prefill-decode router (router.go); anything else
// serves, and the flags after the program (an engine's command line) are logged and read
// for --disaggregation-mode.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

func main() {
	if filepath.Base(os.Args[0]) == "pause" || (len(os.Args) > 1 && os.Args[1] == "pause") {
		pause()
		return
	}
	cfg, err := configFromEnv(os.Getenv)
	if err == nil {
		cfg, err = withArgs(cfg, os.Args[1:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "model-server: bad configuration: %v\n", err)
		os.Exit(2)
	}
	os.Exit(serve(cfg))
}

var logMu sync.Mutex

// logEvent prints one JSON line to stdout: UTC timestamp, event name, the pod, and fields.
// The tests read these lines (the first "ready" answer above all), so keep the names stable.
func logEvent(pod, event string, fields map[string]any) {
	line := map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano), "event": event, "pod": pod}
	for k, v := range fields {
		line[k] = v
	}
	b, err := json.Marshal(line)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"event":%q,"error":%q}`, event, err.Error()))
	}
	logMu.Lock()
	defer logMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}
