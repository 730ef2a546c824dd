package nodeclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rampart-edge/rampart/control/model"
)

// AdminObserver reads a proxy's admin listener at base
// (http://127.0.0.1:9901): /status for the active version, readiness and
// the last snapshot refused (last_refusal: version, reason, error),
// /metrics for rampart_requests_total, rampart_request_errors_total
// (faults gateway and upstream) and rampart_request_duration_seconds.
func AdminObserver(base string, hc *http.Client) func(context.Context) (Observation, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	get := func(ctx context.Context, path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", path, resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	}
	return func(ctx context.Context) (Observation, error) {
		var o Observation
		data, err := get(ctx, "/status")
		if err != nil {
			return o, err
		}
		var st struct {
			Active  string `json:"active_version"`
			Ready   bool   `json:"ready"`
			Refusal *struct {
				Version string `json:"version"`
				Reason  string `json:"reason"`
				Error   string `json:"error"`
			} `json:"last_refusal"`
		}
		if err := json.Unmarshal(data, &st); err != nil {
			return o, fmt.Errorf("/status: %w", err)
		}
		if o.Active, err = model.ParseVersion(st.Active); err != nil {
			return o, fmt.Errorf("/status: %w", err)
		}
		o.Ready = st.Ready
		if r := st.Refusal; r != nil {
			if v, err := model.ParseVersion(r.Version); err == nil {
				o.Refused, o.RefusedReason = v, r.Reason+": "+r.Error
			}
		}
		if data, err = get(ctx, "/metrics"); err != nil {
			return o, err
		}
		m, err := ParseMetrics(strings.NewReader(string(data)))
		if err != nil {
			return o, fmt.Errorf("/metrics: %w", err)
		}
		o.Requests, o.Errors, o.LatencySeconds, o.LatencyCount = m.Requests, m.Errors, m.LatencySeconds, m.LatencyCount
		o.Clusters = m.ClusterHealth()
		o.QuotaAttempts = m.QuotaAttempts
		return o, nil
	}
}

// Metrics are the sums a node reports, read from Prometheus text.
type Metrics struct {
	Requests       uint64  // rampart_requests_total, every label set
	Errors         uint64  // rampart_request_errors_total{fault="gateway"|"upstream"}
	LatencySeconds float64 // rampart_request_duration_seconds_sum
	LatencyCount   uint64  // rampart_request_duration_seconds_count
	// Endpoints counts, per cluster, the rampart_endpoint_healthy series
	// ([0]: healthy ones, value 1; [1]: all).
	Endpoints map[string][2]int
	// QuotaAttempts counts, per quota policy, the requests the proxy tried
	// to admit: rampart_quota_decisions_total{outcome="allowed"|"limited"}
	// (at most MaxQuotaPolicies policies; more are left out).
	QuotaAttempts map[string]uint64
}

// MaxQuotaPolicies bounds the policies a report carries demand for.
const MaxQuotaPolicies = 4096

// ClusterHealth is Endpoints as a list sorted by cluster name.
func (m Metrics) ClusterHealth() []model.ClusterHealth {
	out := make([]model.ClusterHealth, 0, len(m.Endpoints))
	for name, c := range m.Endpoints {
		out = append(out, model.ClusterHealth{Name: name, Healthy: c[0], Total: c[1]})
	}
	slices.SortFunc(out, func(a, b model.ClusterHealth) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ParseMetrics reads the Prometheus text exposition format, summing the
// series it needs and skipping every other line. A sample line it needs
// that does not parse is an error.
func ParseMetrics(r io.Reader) (Metrics, error) {
	var m Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := sample(line)
		if err != nil {
			return m, err
		}
		switch name {
		case "rampart_requests_total":
			m.Requests = add(m.Requests, value)
		case "rampart_request_errors_total":
			if f := label(labels, "fault"); f == "gateway" || f == "upstream" {
				m.Errors = add(m.Errors, value)
			}
		case "rampart_request_duration_seconds_sum":
			if !math.IsNaN(value) && !math.IsInf(value, 0) && value > 0 {
				m.LatencySeconds += value
			}
		case "rampart_request_duration_seconds_count":
			m.LatencyCount = add(m.LatencyCount, value)
		case "rampart_endpoint_healthy":
			c := label(labels, "cluster")
			if c == "" {
				continue
			}
			if m.Endpoints == nil {
				m.Endpoints = map[string][2]int{}
			}
			e := m.Endpoints[c]
			if value == 1 {
				e[0]++
			}
			e[1]++
			m.Endpoints[c] = e
		case "rampart_quota_decisions_total":
			o, p := label(labels, "outcome"), label(labels, "policy")
			if p == "" || (o != "allowed" && o != "limited") {
				continue
			}
			if m.QuotaAttempts == nil {
				m.QuotaAttempts = map[string]uint64{}
			}
			if _, ok := m.QuotaAttempts[p]; ok || len(m.QuotaAttempts) < MaxQuotaPolicies {
				m.QuotaAttempts[p] = add(m.QuotaAttempts[p], value)
			}
		}
	}
	return m, sc.Err()
}

// sample splits `name{labels} value [timestamp]`.
func sample(line string) (name, labels string, value float64, err error) {
	rest := line
	if i := strings.IndexAny(rest, "{ "); i < 0 {
		return "", "", 0, fmt.Errorf("metrics line %.80q: no value", line)
	} else {
		name, rest = rest[:i], rest[i:]
	}
	if strings.HasPrefix(rest, "{") {
		end := closing(rest)
		if end < 0 {
			return "", "", 0, fmt.Errorf("metrics line %.80q: unterminated labels", line)
		}
		labels, rest = rest[1:end], rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return "", "", 0, fmt.Errorf("metrics line %.80q: want a value and an optional timestamp", line)
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("metrics line %.80q: %w", line, err)
	}
	return name, labels, value, nil
}

// closing finds the '}' ending a label set, skipping quoted values.
func closing(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

// label returns a label's value (escapes kept) from `a="x",b="y"`.
func label(labels, name string) string {
	for labels != "" {
		k, rest, ok := strings.Cut(labels, "=\"")
		if !ok {
			return ""
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			v.WriteByte(rest[i])
		}
		if strings.TrimSpace(strings.TrimPrefix(k, ",")) == name {
			return v.String()
		}
		if i >= len(rest) {
			return ""
		}
		labels = strings.TrimPrefix(rest[i+1:], ",")
	}
	return ""
}

// add adds a counter's value, saturating; NaN and negatives count 0.
func add(sum uint64, v float64) uint64 {
	if math.IsNaN(v) || v <= 0 {
		return sum
	}
	if v >= math.MaxUint64 || uint64(v) > math.MaxUint64-sum {
		return math.MaxUint64
	}
	return sum + uint64(v)
}
