package binary

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// client talks to hotreload's endpoints and to the apps of the tests.
// Keep-alives are off so that no idle connection (and its goroutines)
// outlives a test, or pins an nginx worker that is shutting down.
var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// Get requests url and returns the status code and body.
func Get(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Scrape returns the metrics exposed at url, parsed.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	code, body, err := Get(url)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return mfs, nil
}

// Value returns the sum of the samples of the metric family name whose
// labels include labels (nil matches every series), and whether there was
// at least one. A histogram or summary counts its observations.
func Value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	var (
		sum   float64
		found bool
	)
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// prometheusAccept is the Accept header of a Prometheus 3 scrape with its
// default scrape protocols (OpenMetrics first).
const prometheusAccept = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// ScrapeRequest is a GET of url with the headers a Prometheus 3 scrape
// sends: its Accept header, gzip, its User-Agent and scrape timeout. The
// caller's client should keep its connection between scrapes and leave
// compression to it (Transport.DisableCompression), as Prometheus does;
// the body is then gzip-encoded when the server compresses.
func ScrapeRequest(url string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", prometheusAccept)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("User-Agent", "Prometheus/3.5.0")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	return req, nil
}
