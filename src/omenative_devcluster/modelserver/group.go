package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// The gang: each worker holds one long HTTP request to its leader (GET /v1/group/join),
// whose answer streams a line per heartbeat. The leader counts the open streams (one per
// rank) toward its readiness; a stream that closes takes its worker out of the count. A
// worker retries until its first join succeeds; once joined, a stream that ends or misses
// three heartbeats means the leader is gone, and the worker exits 1 (unless it is itself
// draining), as multi-node engines do.

func (s *server) handleJoin(w http.ResponseWriter, r *http.Request) {
	rank, err := strconv.Atoi(r.URL.Query().Get("rank"))
	switch {
	case s.cfg.role != Leader:
		jsonError(w, "not a leader", http.StatusConflict)
		return
	case err != nil || rank < 1 || rank > s.cfg.workers:
		jsonError(w, fmt.Sprintf("rank must be in [1, %d]", s.cfg.workers), http.StatusBadRequest)
		return
	}
	select {
	case <-s.closing:
		jsonError(w, "leader is stopping", http.StatusServiceUnavailable)
		return
	default:
	}
	id := s.addMember(rank, r.URL.Query().Get("pod"))
	defer s.removeMember(rank, id)
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	beat := time.NewTicker(s.cfg.heartbeat)
	defer beat.Stop()
	for {
		if _, err := io.WriteString(w, "beat\n"); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-beat.C:
		}
	}
}

func (s *server) addMember(rank int, pod string) uint64 {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.members[rank] = id
	n := len(s.members)
	s.mu.Unlock()
	logEvent(s.cfg.pod, "worker-joined", map[string]any{"rank": rank, "worker": pod, "joined": n, "workers": s.cfg.workers})
	return id
}

func (s *server) removeMember(rank int, id uint64) {
	s.mu.Lock()
	current := s.members[rank] == id
	if current {
		delete(s.members, rank)
	}
	n := len(s.members)
	s.mu.Unlock()
	if current {
		logEvent(s.cfg.pod, "worker-left", map[string]any{"rank": rank, "joined": n, "workers": s.cfg.workers})
	}
}

// joinLeader retries until the leader takes the worker in, then follows the stream; when
// it ends, the worker exits (or, while draining, just stops following).
func (s *server) joinLeader() {
	retry := min(s.cfg.heartbeat, 200*time.Millisecond)
	var failures int
	for {
		body, conn, err := s.dialLeader()
		if err != nil {
			if failures == 0 {
				logEvent(s.cfg.pod, "join-retrying", map[string]any{"leader": s.cfg.leaderAddr, "error": err.Error()})
			}
			failures++
			time.Sleep(retry)
			continue
		}
		s.mu.Lock()
		s.joined = true
		s.mu.Unlock()
		logEvent(s.cfg.pod, "joined", map[string]any{"leader": s.cfg.leaderAddr, "attempts": failures + 1})
		err = s.followLeader(body, conn)
		s.mu.Lock()
		s.joined = false
		draining := s.draining
		s.mu.Unlock()
		if draining {
			logEvent(s.cfg.pod, "leader-stream-ended", map[string]any{"error": err.Error()})
			return
		}
		logEvent(s.cfg.pod, "leader-gone", map[string]any{"leader": s.cfg.leaderAddr, "error": err.Error()})
		os.Exit(1)
	}
}

// dialLeader sends the join request on a raw connection, so each read can have a deadline.
func (s *server) dialLeader() (*bufio.Reader, net.Conn, error) {
	conn, err := net.DialTimeout("tcp", s.cfg.leaderAddr, 2*time.Second)
	if err != nil {
		return nil, nil, err
	}
	q := url.Values{"rank": {strconv.Itoa(s.cfg.rank)}, "pod": {s.cfg.pod}}
	req, err := http.NewRequest(http.MethodGet, "http://"+s.cfg.leaderAddr+"/v1/group/join?"+q.Encode(), nil)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(3 * s.cfg.heartbeat))
		err = req.Write(conn)
	}
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(conn), req)
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("leader answered %s", resp.Status)
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return bufio.NewReader(resp.Body), conn, nil
}

// followLeader reads heartbeats until the stream ends or one is three beats late.
func (s *server) followLeader(body *bufio.Reader, conn net.Conn) error {
	defer conn.Close()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(3 * s.cfg.heartbeat))
		if _, err := body.ReadString('\n'); err != nil {
			return err
		}
	}
}
