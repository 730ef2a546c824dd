package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/stage"
)

// tryH2C forwards over HTTP/2 to a cluster with protocol h2c (gRPC):
// request and response bodies stream both ways at once, every response
// chunk is flushed, and trailers (grpc-status) are passed on. Only a
// failure to connect is retried: the transport dials before it reads any
// of the body, so nothing was sent.
func (f *forwarding) tryH2C(ep *cluster.Endpoint) outcome {
	r := f.r
	ctx, cancel := context.WithDeadline(r.Context(), f.deadline)
	defer cancel()
	out := &http.Request{
		Method:        r.Method,
		URL:           &url.URL{Scheme: "http", Host: ep.Addr, Path: f.path, RawQuery: f.query},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Host:          r.Host,
		Header:        make(http.Header, len(r.Header)+6),
		ContentLength: 0,
		Body:          http.NoBody,
	}
	for k, vv := range r.Header {
		if k == "Te" {
			if listedIn(vv, "trailers") {
				out.Header["Te"] = []string{"trailers"} // gRPC needs it; HTTP/2 allows exactly this
			}
			continue
		}
		if dropRequestHeader(k) {
			continue
		}
		out.Header[k] = vv
	}
	xff := stage.ClientIP(r.RemoteAddr)
	if prior := r.Header["X-Forwarded-For"]; len(prior) > 0 {
		xff = joinComma(prior) + ", " + xff
	}
	out.Header.Set("X-Forwarded-For", xff)
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	out.Header.Set("X-Forwarded-Proto", proto)
	out.Header.Set("X-Forwarded-Host", r.Host)
	out.Header.Set("X-Request-Id", f.reqID)
	out.Header.Set("X-Rampart-Timeout-Ms", strconv.FormatInt(max(1, time.Until(f.deadline).Milliseconds()), 10))
	if f.hasBody {
		out.ContentLength = f.bodyLen
		if f.replay != nil {
			b := byteReader(f.replay)
			out.Body = io.NopCloser(&b)
		} else {
			out.Body = io.NopCloser(f.body)
		}
	}
	out = out.WithContext(ctx)
	tr := f.p.clusters.H2C(f.cl)
	resp, err := tr.RoundTrip(out)
	if err != nil {
		var op *net.OpError
		dialFailed := errors.As(err, &op) && op.Op == "dial"
		if r.Context().Err() == nil {
			f.cl.Report(ep, 0, true)
		}
		if dialFailed && r.Context().Err() == nil && f.mayRetry(false) {
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, "connect").Inc()
			return retryDial
		}
		f.upstreamFailed(err)
		return served
	}
	defer resp.Body.Close()
	f.cl.Report(ep, resp.StatusCode, false)
	if resp.StatusCode >= 500 {
		f.fault = faultUpstream
	}
	hdr := f.w.Header()
	for k, vv := range resp.Header {
		hdr[k] = vv
	}
	stripHopByHop(hdr)
	for k := range resp.Trailer { // announce trailers the upstream declared
		hdr.Add("Trailer", k)
	}
	f.rr.headers.ApplyResponse(hdr)
	hdr["X-Request-Id"] = []string{f.reqID}
	f.w.WriteHeader(resp.StatusCode)
	f.log.Status = resp.StatusCode
	flusher, _ := f.w.(http.Flusher)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			f.log.Bytes += int64(n)
			if _, werr := f.w.Write(buf[:n]); werr != nil {
				f.log.Err = "client went away during the response"
				return served
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.log.Err = "upstream body: " + rerr.Error()
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, f.errKind(rerr)).Inc()
			f.abort = true
			return served
		}
	}
	for k, vv := range resp.Trailer {
		hdr[http.TrailerPrefix+k] = vv
	}
	return served
}

type byteReader []byte

func (b *byteReader) Read(p []byte) (int, error) {
	if len(*b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, *b)
	*b = (*b)[n:]
	return n, nil
}

func joinComma(vv []string) string {
	s := vv[0]
	for _, v := range vv[1:] {
		s += ", " + v
	}
	return s
}
