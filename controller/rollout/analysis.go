package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
)

// maxAnswer bounds a Prometheus answer.
const maxAnswer = 4 << 20

// query runs q as an instant query on Prometheus's HTTP API and returns
// its single value. No series, more than one, NaN, a status other than
// 200 or an error answer are errors, each in one line; nothing of the
// answer but its error text is quoted.
func query(ctx context.Context, client *http.Client, q *Query) (float64, error) {
	u := q.Address + "/api/v1/query?" + url.Values{"query": {q.Query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", q.Address, unwrapURL(err))
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&body); err != nil {
		return 0, fmt.Errorf("query %s: status %d: %w", q.Address, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query %s: status %d: %s", q.Address, resp.StatusCode, oneLine(body.Error))
	}
	var sample []any
	switch body.Data.ResultType {
	case "scalar":
		if err := json.Unmarshal(body.Data.Result, &sample); err != nil {
			return 0, fmt.Errorf("query %s: a scalar that does not parse: %w", q.Address, err)
		}
	case "vector":
		var vec []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(body.Data.Result, &vec); err != nil {
			return 0, fmt.Errorf("query %s: a vector that does not parse: %w", q.Address, err)
		}
		switch len(vec) {
		case 0:
			return 0, errors.New("the query returns no series (no data); if none means 0, end it with `or vector(0)`")
		case 1:
			sample = vec[0].Value
		default:
			return 0, fmt.Errorf("the query returns %d series, want one: aggregate it, such as sum(...)", len(vec))
		}
	default:
		return 0, fmt.Errorf("the query returns a %s, want a scalar or a vector of one series", body.Data.ResultType)
	}
	if len(sample) != 2 {
		return 0, errors.New("the query's sample does not parse")
	}
	s, _ := sample[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("the query's value %q does not parse", s)
	}
	if math.IsNaN(v) {
		return 0, errors.New("the query's value is NaN")
	}
	return v, nil
}
