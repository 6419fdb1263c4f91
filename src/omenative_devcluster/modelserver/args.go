package main

import (
	"fmt"
	"strconv"
	"strings"
)

// discoveryArgs is what a router reads from sglang_router's flags: the label selectors of
// its prefill and decode pods, their namespace and port.
type discoveryArgs struct {
	prefill   string // --prefill-selector, as a Kubernetes label selector (k1=v1,k2=v2)
	decode    string // --decode-selector
	namespace string // --service-discovery-namespace
	port      int    // --service-discovery-port
}

// withArgs keeps the command line and reads the flags the server acts on. An engine's own
// flags (SGLang's --model-path, --tp-size, ...) are kept for the "listening" log line, so a
// test sees what the kubelet expanded. `router` as the first argument makes a router.
func withArgs(c config, args []string) (config, error) {
	c.args = append([]string{}, args...)
	router := len(args) > 0 && args[0] == "router"
	if router {
		c.role, c.workers, c.leaderAddr = Router, 0, ""
		c.discovery.port = 8080
	}
	for i := 0; i < len(args); i++ {
		flag, value, inline := strings.Cut(args[i], "=")
		if !strings.HasPrefix(flag, "--") {
			continue
		}
		var values []string
		if inline {
			values = []string{value}
		}
		// sglang_router's selectors take several words (key=value key=value)
		for !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
			values = append(values, args[i])
		}
		if err := c.setFlag(flag, values); err != nil {
			return c, err
		}
	}
	if router && (c.discovery.prefill == "" || c.discovery.decode == "") {
		return c, fmt.Errorf("a router needs --prefill-selector and --decode-selector")
	}
	return c, nil
}

func (c *config) setFlag(flag string, values []string) error {
	joined := strings.Join(strings.Fields(strings.Join(values, " ")), ",")
	switch flag {
	case "--disaggregation-mode":
		c.mode = joined
	case "--prefill-selector":
		c.discovery.prefill = joined
	case "--decode-selector":
		c.discovery.decode = joined
	case "--service-discovery-namespace":
		c.discovery.namespace = joined
	case "--service-discovery-port":
		port, err := strconv.Atoi(joined)
		if err != nil || port <= 0 {
			return fmt.Errorf("--service-discovery-port must be a port number, got %q", joined)
		}
		c.discovery.port = port
	}
	return nil
}
