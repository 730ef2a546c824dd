package nodeclient

import (
	"context"
	"fmt"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// watchPurge follows GET /v1/node/purge like the deny channel: each cache
// purge document newer than the one handed over is verified and written
// atomically to PurgeFile, which the proxy's purge watcher applies. When
// the control plane is unreachable the file stays as it is.
func (cl *Client) watchPurge(ctx context.Context) {
	b := backoff{min: cl.c.MinBackoff, max: cl.c.MaxBackoff}
	for ctx.Err() == nil {
		cl.mu.Lock()
		q := model.WatchQuery{Identity: cl.c.Identity, Version: snapshot.Version(cl.purgeVersion), Timeout: cl.c.WatchTimeout}
		cl.mu.Unlock()
		_, body, err := cl.poll(ctx, "/v1/node/purge", q, purge.MaxFileBytes)
		if err != nil {
			if ctx.Err() == nil {
				cl.log.Debug("purge watch failed; retrying", "err", err)
				b.wait(ctx)
			}
			continue
		}
		if body == nil {
			b.reset()
			continue
		}
		if err := cl.takePurge(body); err != nil {
			b.wait(ctx)
			continue
		}
		b.reset()
	}
}

func (cl *Client) takePurge(body []byte) error {
	d, err := purge.Parse(body, cl.c.PublicKey)
	if err != nil {
		cl.refuse("purge document", snapshot.Version{}, err)
		return err
	}
	cl.mu.Lock()
	have := cl.purgeVersion
	cl.mu.Unlock()
	if !have.Less(d.Version) {
		err := fmt.Errorf("version %s is not newer than %s", d.Version, have)
		cl.refuse("purge document", snapshot.Version{}, err)
		return err
	}
	if err := envelope.WriteFileAtomic(cl.c.PurgeFile, body, 0o600); err != nil {
		cl.log.Error("cannot hand the purge document over", "file", cl.c.PurgeFile, "err", err)
		return err
	}
	cl.mu.Lock()
	cl.purgeVersion = d.Version
	cl.st.Purge = d.Version.String()
	cl.mu.Unlock()
	cl.log.Info("purge document handed over", "version", d.Version.String(), "rules", len(d.Rules))
	return nil
}

// PurgeVersion is the purge document handed over last.
func (cl *Client) PurgeVersion() envelope.Version {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.purgeVersion
}
