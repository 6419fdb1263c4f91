package main

// The router: what sglang_router does in prefill-decode mode, in small. It finds its
// prefill and decode pods by their labels through the Kubernetes API (the pod's service
// account, as sglang_router's --service-discovery does; it needs get/list on pods), polls
// every second, and sends each request to one ready prefill pod and one ready decode pod,
// in turn. It answers 200 only when both answered 200, with both answers inside, so a
// client sees which prefill and which decode pod served it. /ready passes once it knows at
// least one ready pod of each.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// discovery keeps the ready prefill and decode pods (host:port), refreshed every second.
type discovery struct {
	args   discoveryArgs
	api    string // https://host:port of the API server, or DISCOVERY_API (plain HTTP, tests)
	token  bool   // send the service account's token
	client *http.Client

	mu      sync.Mutex
	prefill []string
	decode  []string
	next    uint64
}

// newDiscovery reads where the API server is: DISCOVERY_API (a test's plain-HTTP stand-in),
// else the in-cluster address and the service account's CA.
func newDiscovery(args discoveryArgs, getenv func(string) string) (*discovery, error) {
	d := &discovery{args: args, client: &http.Client{Timeout: 5 * time.Second}}
	if api := getenv("DISCOVERY_API"); api != "" {
		d.api = api
		return d, nil
	}
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" {
		return nil, fmt.Errorf("a router needs KUBERNETES_SERVICE_HOST (in a pod) or DISCOVERY_API")
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("the service account's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir)
	}
	d.api, d.token = "https://"+net.JoinHostPort(host, port), true
	d.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return d, nil
}

// readyPods lists the pods of a selector and keeps the ready ones with an IP, by name.
func (d *discovery) readyPods(selector string) ([]string, error) {
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods?labelSelector=%s", d.api,
		url.PathEscape(d.args.namespace), url.QueryEscape(selector))
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if d.token {
		token, err := os.ReadFile(serviceAccountDir + "/token") // projected: re-read each time
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("listing pods %q: %s %s", selector, resp.Status, bytes.TrimSpace(body))
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var ready []string
	for _, p := range list.Items {
		ok := p.Metadata.DeletionTimestamp == nil && p.Status.PodIP != ""
		ok = ok && slices.ContainsFunc(p.Status.Conditions, func(c struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}) bool {
			return c.Type == "Ready" && c.Status == "True"
		})
		if ok {
			ready = append(ready, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(d.args.port)))
		}
	}
	slices.Sort(ready)
	return ready, nil
}

// watch refreshes the pods every second for ever, logging each change and each new error.
func (d *discovery) watch(pod string) {
	var lastErr string
	for {
		prefill, err := d.readyPods(d.args.prefill)
		var decode []string
		if err == nil {
			decode, err = d.readyPods(d.args.decode)
		}
		if err != nil {
			if err.Error() != lastErr {
				logEvent(pod, "discovery-failed", map[string]any{"error": err.Error()})
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
			d.mu.Lock()
			changed := !slices.Equal(prefill, d.prefill) || !slices.Equal(decode, d.decode)
			d.prefill, d.decode = prefill, decode
			d.mu.Unlock()
			if changed {
				logEvent(pod, "discovered", map[string]any{"prefill": prefill, "decode": decode})
			}
		}
		time.Sleep(time.Second)
	}
}

// pick returns the next prefill and decode pods in turn ("" when none is known).
func (d *discovery) pick() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.prefill) == 0 || len(d.decode) == 0 {
		return "", ""
	}
	n := d.next
	d.next++
	return d.prefill[n%uint64(len(d.prefill))], d.decode[n%uint64(len(d.decode))]
}

// known says whether a ready pod of each kind is known (the router's readiness).
func (d *discovery) known() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.prefill) > 0 && len(d.decode) > 0
}

// route sends the request to a prefill pod, then to a decode pod, and answers with both.
func (s *server) route(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		jsonError(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	prefillAddr, decodeAddr := s.discovery.pick()
	if prefillAddr == "" {
		jsonError(w, "no ready prefill and decode pods", http.StatusServiceUnavailable)
		return
	}
	answers := map[string]any{}
	for _, hop := range []struct{ name, addr string }{{"prefill", prefillAddr}, {"decode", decodeAddr}} {
		answer, err := s.forward(r, hop.addr, body)
		if err != nil {
			jsonError(w, fmt.Sprintf("%s pod %s: %v", hop.name, hop.addr, err), http.StatusBadGateway)
			return
		}
		answers[hop.name] = answer
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"revision": s.cfg.revision, "instance": s.cfg.instance, "pod": s.cfg.pod,
		"role": s.cfg.role, "component": s.cfg.component, "path": r.URL.Path,
		"prefill": answers["prefill"], "decode": answers["decode"],
	})
}

// forward sends one request to addr and returns its JSON answer (an error unless 200).
func (s *server) forward(r *http.Request, addr string, body []byte) (map[string]any, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	resp, err := s.upstream.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return nil, fmt.Errorf("answer not JSON: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s: %v", resp.Status, answer)
	}
	return answer, nil
}
