package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotreload/hotreload/controller"
)

// maxReport bounds a sidecar's /-/content answer.
const maxReport = 1 << 20

// contentURL is where a pod's sidecar reports: GET /-/content on the pod's
// address, at the port named [controller.SidecarPort] of the container
// named [controller.SidecarContainer] (a native sidecar included). A
// non-empty override, for tests only (Options.ContentURL), replaces it,
// with {namespace} and {pod} filled in.
func contentURL(p *corev1.Pod, override string) (string, error) {
	if override != "" {
		return strings.NewReplacer("{namespace}", p.Namespace, "{pod}", p.Name).Replace(override), nil
	}
	if p.Status.PodIP == "" {
		return "", errors.New("the pod has no address yet")
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name != controller.SidecarContainer {
			continue
		}
		for _, port := range c.Ports {
			if port.Name == controller.SidecarPort {
				return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))) + "/-/content", nil
			}
		}
	}
	return "", fmt.Errorf("no container named %s with a port named %s", controller.SidecarContainer, controller.SidecarPort)
}

// scrape asks a pod's sidecar what it runs for ref. Any failure is an
// error: the pod is "not reported", never healthy.
func scrape(ctx context.Context, client *http.Client, addr, ref string) (*Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", addr, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", addr, resp.StatusCode)
	}
	var body struct {
		Views []struct {
			Ref string `json:"ref"`
			Report
		} `json:"views"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReport)).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", addr, err)
	}
	for _, v := range body.Views {
		if v.Ref == ref {
			r := v.Report
			return &r, nil
		}
	}
	return nil, fmt.Errorf("the sidecar reports no view of %s (is it run with --view=ref=%s,...?)", ref, ref)
}

// unwrapURL drops the method and URL that url.Error repeats.
func unwrapURL(err error) error {
	if u, ok := errors.AsType[*url.Error](err); ok {
		return u.Err
	}
	return err
}
