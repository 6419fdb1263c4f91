package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Role is what a pod is in its Instance.
type Role string

const (
	// Single is a one-pod Instance: ready once loaded.
	Single Role = "single"
	// Leader waits for all its workers to join before it is ready.
	Leader Role = "leader"
	// Worker joins its leader, and exits when the leader goes away.
	Worker Role = "worker"
	// Router sends each request to a prefill pod and a decode pod it finds by their labels.
	Router Role = "router"
)

// config is everything the environment tells the server (see docs/model-server.md).
type config struct {
	listen     string        // HOST:PORT to listen on
	revision   string        // MODEL_REVISION (the image sets it to its tag)
	pod        string        // POD_NAME, else the hostname
	instance   string        // OME_INSTANCE_INDEX, else INSTANCE_INDEX
	role       Role          // from the rank and group size
	rank       int           // OME_INSTANCE_POD_RANK, else LWS_WORKER_INDEX (0 = leader)
	workers    int           // group size - 1 (a leader waits for this many)
	leaderAddr string        // worker only: host:port of the leader
	load       time.Duration // LOAD_SECONDS: not ready before this much time after start
	drain      time.Duration // DRAIN_SECONDS: keep answering this long after SIGTERM
	shutdown   time.Duration // SHUTDOWN_TIMEOUT_SECONDS: at most this for in-flight requests
	delay      time.Duration // RESPONSE_DELAY_SECONDS: each answer takes this long
	heartbeat  time.Duration // HEARTBEAT_SECONDS: leader -> worker beat; 3 missed = gone
	crashAfter time.Duration // CRASH_AFTER_SECONDS: exit 1 this long after start (0: never)
	failReady  bool          // FAIL_READY: /ready answers 503 from the start
	component  string        // OME_COMPONENT: engine, decoder or router
	args       []string      // the command line after the program (runtimes' engine flags)
	mode       string        // --disaggregation-mode of the command line: prefill or decode
	discovery  discoveryArgs // router only: where its prefill and decode pods are
}

// configFromEnv reads the configuration; an error names the variable and the rule.
func configFromEnv(getenv func(string) string) (config, error) {
	p := envParser{getenv: getenv}
	port := firstSet(getenv, "PORT")
	if port == "" {
		port = "8080"
	}
	c := config{
		listen:     net.JoinHostPort(getenv("HOST"), port),
		revision:   firstSet(getenv, "MODEL_REVISION"),
		pod:        firstSet(getenv, "POD_NAME"),
		instance:   firstSet(getenv, "OME_INSTANCE_INDEX", "INSTANCE_INDEX"),
		rank:       p.integer(0, "OME_INSTANCE_POD_RANK", "LWS_WORKER_INDEX"),
		load:       p.seconds("LOAD_SECONDS", 0),
		drain:      p.seconds("DRAIN_SECONDS", 5),
		shutdown:   p.seconds("SHUTDOWN_TIMEOUT_SECONDS", 30),
		delay:      p.seconds("RESPONSE_DELAY_SECONDS", 0),
		heartbeat:  p.seconds("HEARTBEAT_SECONDS", 1),
		crashAfter: p.seconds("CRASH_AFTER_SECONDS", 0),
		failReady:  p.boolean("FAIL_READY"),
		component:  firstSet(getenv, "OME_COMPONENT"),
	}
	size := p.integer(1, "OME_INSTANCE_POD_COUNT", "LWS_GROUP_SIZE")
	if p.err != nil {
		return c, p.err
	}
	if c.revision == "" {
		c.revision = "unknown"
	}
	if c.pod == "" {
		c.pod, _ = os.Hostname()
	}
	if c.heartbeat <= 0 {
		return c, fmt.Errorf("HEARTBEAT_SECONDS must be > 0")
	}
	switch {
	case size < 1:
		return c, fmt.Errorf("the group size (OME_INSTANCE_POD_COUNT or LWS_GROUP_SIZE) must be >= 1, got %d", size)
	case c.rank < 0 || c.rank >= size:
		return c, fmt.Errorf("the rank (OME_INSTANCE_POD_RANK or LWS_WORKER_INDEX) must be in [0, %d), got %d", size, c.rank)
	case size == 1:
		c.role = Single
	case c.rank == 0:
		c.role, c.workers = Leader, size-1
	default:
		c.role = Worker
		addr := firstSet(getenv, "OME_LEADER_ADDRESS", "LWS_LEADER_ADDRESS")
		if addr == "" {
			return c, fmt.Errorf("a worker (rank %d) needs OME_LEADER_ADDRESS or LWS_LEADER_ADDRESS", c.rank)
		}
		c.leaderAddr = withPort(addr, firstSet(getenv, "LEADER_PORT", "PORT"))
	}
	return c, nil
}

// withPort adds port (default 8080) to a leader address that has none: OME and LWS give a
// bare DNS name.
func withPort(addr, port string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if port == "" || port == "0" {
		port = "8080"
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), port)
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// envParser parses typed variables and keeps the first error.
type envParser struct {
	getenv func(string) string
	err    error
}

func (p *envParser) integer(def int, names ...string) int {
	for _, n := range names {
		v := strings.TrimSpace(p.getenv(n))
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil && p.err == nil {
			p.err = fmt.Errorf("%s must be an integer, got %q", n, v)
		}
		return i
	}
	return def
}

func (p *envParser) seconds(name string, def float64) time.Duration {
	v := strings.TrimSpace(p.getenv(name))
	f := def
	if v != "" {
		var err error
		f, err = strconv.ParseFloat(v, 64)
		if (err != nil || f < 0) && p.err == nil {
			p.err = fmt.Errorf("%s must be a number of seconds >= 0, got %q", name, v)
		}
	}
	return time.Duration(f * float64(time.Second))
}

func (p *envParser) boolean(name string) bool {
	v := strings.TrimSpace(p.getenv(name))
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%s must be true or false, got %q", name, v)
	}
	return b
}
