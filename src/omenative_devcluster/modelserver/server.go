package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// server holds the state behind /ready; every field after mu is guarded by it.
type server struct {
	cfg     config
	http    *http.Server
	closing chan struct{} // closed when the drain delay is over: worker streams end
	// router only: its prefill and decode pods, and the client that calls them
	discovery *discovery
	upstream  *http.Client

	mu         sync.Mutex
	loaded     bool
	failReady  bool
	draining   bool
	joined     bool           // worker: connected to its leader
	members    map[int]uint64 // leader: rank -> id of its current connection
	nextID     uint64
	lastAnswer string // the last /ready reason, to log changes only
	everReady  bool
}

func newServer(cfg config) *server {
	s := &server{cfg: cfg, closing: make(chan struct{}), failReady: cfg.failReady, members: map[int]uint64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", s.handleReady)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/crash", s.handleCrash)
	mux.HandleFunc("/fail-ready", s.handleFailReady)
	mux.HandleFunc("/v1/group/join", s.handleJoin)
	mux.HandleFunc("/", s.handleRequest)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	return s
}

// readiness says whether /ready answers 200, and why not.
func (s *server) readiness() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return false, "draining"
	case s.failReady:
		return false, "told to fail its probe"
	case !s.loaded:
		return false, "loading"
	case s.cfg.role == Leader && len(s.members) < s.cfg.workers:
		return false, fmt.Sprintf("%d of %d workers joined", len(s.members), s.cfg.workers)
	case s.cfg.role == Worker && !s.joined:
		return false, "not joined to its leader"
	case s.cfg.role == Router && !s.discovery.known():
		return false, "no ready prefill and decode pods"
	}
	return true, "ready"
}

func (s *server) handleReady(w http.ResponseWriter, _ *http.Request) {
	ready, reason := s.readiness()
	s.mu.Lock()
	changed := reason != s.lastAnswer
	first := ready && !s.everReady
	s.lastAnswer, s.everReady = reason, s.everReady || ready
	s.mu.Unlock()
	if first {
		logEvent(s.cfg.pod, "first-ready", map[string]any{"revision": s.cfg.revision, "instance": s.cfg.instance})
	}
	if changed {
		logEvent(s.cfg.pod, "ready-answer", map[string]any{"ready": ready, "reason": reason})
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": ready, "reason": reason, "pod": s.cfg.pod})
}

// handleRequest answers every other path (/, /v1/completions, ...) with who answered.
func (s *server) handleRequest(w http.ResponseWriter, r *http.Request) {
	delay := s.cfg.delay
	if q := r.URL.Query().Get("delay"); q != "" {
		if f, err := strconv.ParseFloat(q, 64); err == nil && f >= 0 {
			delay = time.Duration(f * float64(time.Second))
		}
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	if s.cfg.role == Router {
		s.route(w, r)
		return
	}
	ready, _ := s.readiness()
	writeJSON(w, http.StatusOK, map[string]any{
		"revision": s.cfg.revision, "instance": s.cfg.instance, "pod": s.cfg.pod,
		"role": s.cfg.role, "rank": s.cfg.rank, "path": r.URL.Path, "ready": ready,
		"component": s.cfg.component, "mode": s.cfg.mode,
	})
}

// handleCrash (POST) exits at once with code 1, as an engine that hits a fatal error.
func (s *server) handleCrash(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		jsonError(w, "POST to crash", http.StatusMethodNotAllowed)
		return
	}
	logEvent(s.cfg.pod, "crash", map[string]any{"why": "POST /crash"})
	body := []byte(`{"crashing":true}` + "\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body))) // whole before the exit
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(body)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	os.Exit(1)
}

// handleFailReady: POST makes /ready answer 503 from now on, DELETE undoes it.
func (s *server) handleFailReady(w http.ResponseWriter, r *http.Request) {
	var fail bool
	switch r.Method {
	case http.MethodPost:
		fail = true
	case http.MethodDelete:
		fail = false
	default:
		jsonError(w, "POST to fail the probe, DELETE to pass it again", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	s.failReady = fail
	s.mu.Unlock()
	logEvent(s.cfg.pod, "fail-ready", map[string]any{"fail": fail})
	writeJSON(w, http.StatusOK, map[string]any{"failReady": fail})
}

// jsonError answers an error as JSON too, so clients parse every answer the same way.
func jsonError(w http.ResponseWriter, msg string, status int) {
	writeJSON(w, status, map[string]any{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// serve runs until SIGTERM/SIGINT and the drain are over; it returns the exit code.
func serve(cfg config) int {
	s := newServer(cfg)
	if cfg.role == Router {
		d, err := newDiscovery(cfg.discovery, os.Getenv)
		if err != nil {
			logEvent(cfg.pod, "discovery-failed", map[string]any{"error": err.Error()})
			return 2
		}
		s.discovery, s.upstream = d, &http.Client{Timeout: 10 * time.Second}
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		logEvent(cfg.pod, "listen-failed", map[string]any{"error": err.Error()})
		return 1
	}
	logEvent(cfg.pod, "listening", map[string]any{
		"addr": ln.Addr().String(), "role": cfg.role, "rank": cfg.rank, "workers": cfg.workers,
		"leader": cfg.leaderAddr, "revision": cfg.revision, "instance": cfg.instance,
		"component": cfg.component, "mode": cfg.mode, "args": cfg.args,
	})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(ln) }()
	go s.loadModel()
	if cfg.crashAfter > 0 {
		time.AfterFunc(cfg.crashAfter, func() {
			logEvent(cfg.pod, "crash", map[string]any{"why": "CRASH_AFTER_SECONDS"})
			os.Exit(1)
		})
	}
	if cfg.role == Worker {
		go s.joinLeader()
	}
	if cfg.role == Router {
		go s.discovery.watch(cfg.pod)
	}
	select {
	case err := <-served:
		logEvent(cfg.pod, "serve-failed", map[string]any{"error": err.Error()})
		return 1
	case sig := <-sigs:
		return s.drainAndStop(sig, ln)
	}
}

func (s *server) loadModel() {
	time.Sleep(s.cfg.load)
	// logged under the lock: no "first-ready" line comes before this one, and once it is
	// out, /ready knows
	s.mu.Lock()
	defer s.mu.Unlock()
	logEvent(s.cfg.pod, "loaded", map[string]any{"after_s": s.cfg.load.Seconds()})
	s.loaded = true
}

// drainAndStop: /ready turns 503 and answers ask clients to close their connections, the
// server keeps answering for the drain delay (kube-proxy drops the pod meanwhile), then
// stops accepting, ends its workers' streams and finishes the requests in flight.
func (s *server) drainAndStop(sig os.Signal, ln net.Listener) int {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.http.SetKeepAlivesEnabled(false)
	logEvent(s.cfg.pod, "draining", map[string]any{"signal": sig.String(), "drain_s": s.cfg.drain.Seconds()})
	time.Sleep(s.cfg.drain)
	// closed here rather than by Shutdown, so that once "shutting-down" is logged no new
	// connection gets in
	_ = ln.Close()
	logEvent(s.cfg.pod, "shutting-down", map[string]any{"timeout_s": s.cfg.shutdown.Seconds()})
	close(s.closing)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.shutdown)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		logEvent(s.cfg.pod, "stopped", map[string]any{"error": err.Error()})
		return 1
	}
	logEvent(s.cfg.pod, "stopped", nil)
	return 0
}
