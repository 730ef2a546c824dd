package anycast

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// The agent feeds inputs by name; each setter fits one kind. A value holds
// until replaced; every input is sampled once per sample interval and
// rise/fall count those samples. An input never set is down.

// SetUp gives a bool input its current value (detail says why, for status).
func (a *Announcer) SetUp(name string, up bool, detail string) error {
	return a.set(name, KindBool, func(in *input) { in.up, in.detail, in.fn = up, detail, nil })
}

// SetFunc makes a bool input polled: f is called once per sample, outside
// the announcer's lock, and must return quickly.
func (a *Announcer) SetFunc(name string, f func() (up bool, detail string)) error {
	return a.set(name, KindBool, func(in *input) { in.fn = f })
}

// SetShare gives a share input the healthy and total counts (e.g. the local
// upstream endpoints of a VIP's clusters).
func (a *Announcer) SetShare(name string, healthy, total int) error {
	if healthy < 0 || total < 0 || healthy > total {
		return fmt.Errorf("anycast input %q: share %d/%d is not a share", name, healthy, total)
	}
	return a.set(name, KindShare, func(in *input) { in.healthy, in.size = healthy, total })
}

// SetTime gives an age input its timestamp (e.g. when the active snapshot
// was built); it is up while now − t ≤ max_age_ms.
func (a *Announcer) SetTime(name string, t time.Time) error {
	return a.set(name, KindAge, func(in *input) { in.at = t })
}

func (a *Announcer) set(name, kind string, f func(*input)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, ok := a.eng.byName[name]
	if !ok {
		return fmt.Errorf("anycast: no input %q in the config", name)
	}
	if in.cfg.Kind != kind {
		return fmt.Errorf("anycast input %q is of kind %s, not %s", name, in.cfg.Kind, kind)
	}
	f(in)
	in.set = true
	return nil
}

type polled struct {
	up     bool
	detail string
}

// poll calls the SetFunc functions outside the lock.
func (a *Announcer) poll() map[*input]polled {
	a.mu.Lock()
	fns := map[*input]func() (bool, string){}
	for _, in := range a.eng.inputs {
		if in.fn != nil {
			fns[in] = in.fn
		}
	}
	a.mu.Unlock()
	out := make(map[*input]polled, len(fns))
	for in, f := range fns {
		up, detail := f()
		out[in] = polled{up, detail}
	}
	return out
}

// syncProbes starts a probe for every http input of the current config
// and stops those of inputs gone or changed. Callers hold mu.
func (a *Announcer) syncProbes() {
	want := map[string]Input{}
	for _, in := range a.cfg.Inputs {
		if in.Kind == KindHTTP {
			want[in.Name+"\x00"+fmt.Sprint(in)] = in
		}
	}
	for key, cancel := range a.probes {
		if _, ok := want[key]; !ok {
			cancel()
			delete(a.probes, key)
		}
	}
	for key, in := range want {
		if _, ok := a.probes[key]; !ok {
			ctx, cancel := context.WithCancel(context.Background())
			a.probes[key] = cancel
			a.probeWG.Add(1)
			go a.probe(ctx, in)
		}
	}
}

// probe runs an http input: a GET every sample interval, each bounded by
// timeout_ms; up when the status is one of expect_status.
func (a *Announcer) probe(ctx context.Context, c Input) {
	defer a.probeWG.Done()
	t := time.NewTicker(ms(a.fixed.SampleIntervalMs))
	defer t.Stop()
	for {
		up, detail := a.probeOnce(ctx, c)
		a.mu.Lock()
		if in := a.eng.byName[c.Name]; in != nil && ctx.Err() == nil {
			in.set, in.up, in.detail, in.at = true, up, detail, time.Now()
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Announcer) probeOnce(ctx context.Context, c Input) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, ms(c.TimeoutMs))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return false, err.Error()
	}
	if c.Host != "" {
		req.Host = c.Host
	}
	req.Header.Set("User-Agent", "rampart-anycast-probe")
	start := time.Now()
	resp, err := a.client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	detail := fmt.Sprintf("status %d in %s", resp.StatusCode, time.Since(start).Round(time.Microsecond))
	return slices.Contains(c.ExpectStatus, resp.StatusCode), detail
}
