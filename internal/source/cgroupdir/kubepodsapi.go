package cgroupdir

// The ddiskqos.* annotations of the kubelet's pods (LayoutKubepods with
// Options.KubeletPods), from the kubelet's own HTTP endpoint
//
//	GET http://127.0.0.1:10255/pods   (the read-only port)
//	{"kind":"PodList","items":[{"metadata":{"uid":"…","annotations":{"ddiskqos.level":"4"}}}]}
//
// The kubelet serves every pod it runs there, static or from the API
// server, as the PodList of the core API: no client library and no grpc
// (the CRI's annotations would need both), and no API server (a
// standalone node has none; a DaemonSet reading the API server would need
// RBAC and a watch of every pod of the cluster to learn what its node
// already knows). The static pods' manifest files would serve only the
// static pods.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// kubePodsTimeout bounds one read of the kubelet's /pods.
const kubePodsTimeout = 2 * time.Second

// kubePods reads the ddiskqos.* annotations of the kubelet's pods by uid.
type kubePods struct {
	url    string
	client *http.Client
	byUID  map[string]map[string]string // only the ddiskqos.* annotations
	err    error                        // of the last read
}

func newKubePods(url string) *kubePods {
	return &kubePods{url: url, client: &http.Client{Timeout: kubePodsTimeout}, byUID: map[string]map[string]string{}}
}

// parseKubePods reads a PodList and keeps, per pod uid, its annotations
// whose keys start with "ddiskqos." (the keys of Docker's labels; the
// policy parses them as it parses labels).
func parseKubePods(r io.Reader) (map[string]map[string]string, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				UID         string            `json:"uid"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode the kubelet's pod list: %w", err)
	}
	out := map[string]map[string]string{}
	for _, p := range list.Items {
		if p.Metadata.UID == "" {
			continue
		}
		for k, v := range p.Metadata.Annotations {
			if !strings.HasPrefix(k, "ddiskqos.") {
				continue
			}
			if out[p.Metadata.UID] == nil {
				out[p.Metadata.UID] = map[string]string{}
			}
			out[p.Metadata.UID][k] = v
		}
	}
	return out, nil
}

// read fetches the pod list again. On an error the annotations known
// before are kept.
func (k *kubePods) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, kubePodsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		k.err = err
		return
	}
	resp, err := k.client.Do(req)
	if err != nil {
		k.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		k.err = fmt.Errorf("GET %s: %s", k.url, resp.Status)
		return
	}
	m, err := parseKubePods(resp.Body)
	if k.err = err; err == nil {
		k.byUID = m
	}
}
