package nodeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// backoff is a full-jitter exponential backoff.
type backoff struct {
	min, max time.Duration
	n        int
}

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) wait(ctx context.Context) {
	d := b.min << min(b.n, 20)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.n++
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// poll makes one long-poll GET; body is nil on 204.
func (cl *Client) poll(ctx context.Context, path string, q model.WatchQuery, limit int64) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cl.c.WatchTimeout+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.c.URL+path+"?"+q.Values().Encode(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token)
	resp, err := cl.c.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cl.contact(path, nil, err)
		}
		return nil, nil, err
	}
	defer resp.Body.Close()
	cl.contact(path, resp, nil)
	switch resp.StatusCode {
	case http.StatusNoContent:
		return resp, nil, nil
	case http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err == nil && int64(len(body)) > limit {
			err = fmt.Errorf("response over %d bytes", limit)
		}
		return resp, body, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp, nil, fmt.Errorf("%s: %s: %s", path, resp.Status, msg)
}

func (cl *Client) watchSnapshots(ctx context.Context) {
	b := backoff{min: cl.c.MinBackoff, max: cl.c.MaxBackoff}
	for ctx.Err() == nil {
		cl.mu.Lock()
		q := model.WatchQuery{Identity: cl.c.Identity, Version: cl.st.Downloaded, Timeout: cl.c.WatchTimeout}
		cl.mu.Unlock()
		resp, body, err := cl.poll(ctx, "/v1/node/snapshot", q, snapshot.MaxFileBytes)
		if err != nil {
			if ctx.Err() == nil {
				cl.log.Debug("snapshot watch failed; retrying", "err", err)
				b.wait(ctx)
			}
			continue
		}
		if body == nil {
			b.reset()
			continue
		}
		if err := cl.take(body, resp.Header.Get("X-Rampart-Version")); err != nil {
			b.wait(ctx)
			continue
		}
		b.reset()
	}
}

// take verifies a snapshot file, checks that it is newer than what the
// node has, and hands it to the proxy.
func (cl *Client) take(body []byte, offered string) error {
	ov, oerr := model.ParseVersion(offered)
	if oerr == nil {
		cl.mu.Lock()
		cl.st.Desired = ov
		cl.mu.Unlock()
	}
	s, err := snapshot.Parse(body, cl.c.PublicKey)
	if err != nil {
		cl.refuse("snapshot", ov, err)
		return err
	}
	cl.mu.Lock()
	have := cl.st.Downloaded
	cl.mu.Unlock()
	if !have.Less(s.Version) {
		err := fmt.Errorf("version %s is not newer than %s", s.Version, have)
		if s.Version.Epoch < have.Epoch {
			err = fmt.Errorf("version %s is from an older epoch than %s", s.Version, have)
		}
		cl.refuse("snapshot", s.Version, err)
		return err
	}
	if err := envelope.WriteFileAtomic(filepath.Join(cl.c.SnapshotDir, fileName(s.Version)), body, 0o600); err != nil {
		cl.mu.Lock()
		cl.st.LastError = err.Error()
		cl.mu.Unlock()
		cl.log.Error("cannot hand the snapshot over", "err", err)
		return err
	}
	cl.mu.Lock()
	cl.st.Downloaded = s.Version
	if cl.st.Desired.Less(s.Version) {
		cl.st.Desired = s.Version
	}
	cl.handed = s.Version
	cl.mu.Unlock()
	cl.log.Info("snapshot handed over", "version", s.Version.String(), "routes", len(s.Config.Routes))
	cl.prune()
	cl.poke()
	return nil
}

// prune removes all but the newest KeepSnapshots files this client wrote.
func (cl *Client) prune() {
	fs := cl.snapFiles()
	sort.Slice(fs, func(i, j int) bool { return fs[j].v.Less(fs[i].v) })
	for i := cl.c.KeepSnapshots; i < len(fs); i++ {
		_ = os.Remove(filepath.Join(cl.c.SnapshotDir, fs[i].name))
	}
}

func (cl *Client) watchDeny(ctx context.Context) {
	b := backoff{min: cl.c.MinBackoff, max: cl.c.MaxBackoff}
	for ctx.Err() == nil {
		cl.mu.Lock()
		q := model.WatchQuery{Identity: cl.c.Identity, Sequence: cl.st.DenySequence, Timeout: cl.c.WatchTimeout}
		cl.mu.Unlock()
		_, body, err := cl.poll(ctx, "/v1/node/deny", q, deny.MaxFileBytes)
		if err != nil {
			if ctx.Err() == nil {
				cl.log.Debug("deny watch failed; retrying", "err", err)
				b.wait(ctx)
			}
			continue
		}
		if body == nil {
			b.reset()
			continue
		}
		if err := cl.takeDeny(body); err != nil {
			b.wait(ctx)
			continue
		}
		b.reset()
	}
}

func (cl *Client) takeDeny(body []byte) error {
	l, err := deny.Parse(body, cl.c.PublicKey)
	if err != nil {
		cl.refuse("deny list", snapshot.Version{}, err)
		return err
	}
	cl.mu.Lock()
	have := cl.st.DenySequence
	cl.mu.Unlock()
	if l.Sequence() <= have {
		err := fmt.Errorf("sequence %d is not above %d", l.Sequence(), have)
		cl.refuse("deny list", snapshot.Version{}, err)
		return err
	}
	if err := envelope.WriteFileAtomic(cl.c.DenyFile, body, 0o600); err != nil {
		cl.log.Error("cannot hand the deny list over", "err", err)
		return err
	}
	cl.mu.Lock()
	cl.st.DenySequence = l.Sequence()
	cl.mu.Unlock()
	cl.log.Info("deny list handed over", "sequence", l.Sequence(), "entries", l.Len())
	cl.poke()
	return nil
}
