package h2

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkServe serves small GETs over 8 cleartext connections with
// concurrent streams, on rampart's server and on x/net's, and reports
// requests per second and allocations per request (both sides of the
// process: client and server):
//
//	go test -run '^$' -bench BenchmarkServe -benchmem -count 5 ./l7/h2
func BenchmarkServe(b *testing.B) {
	for _, srv := range benchServers() {
		b.Run(srv.name, func(b *testing.B) {
			ln := benchListen(b, srv.serveConn)
			const conns = 8
			clients := make([]*http.Client, conns)
			for i := range clients {
				tr := &http2.Transport{AllowHTTP: true,
					DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
						var d net.Dialer
						return d.DialContext(ctx, network, addr)
					}}
				defer tr.CloseIdleConnections()
				clients[i] = &http.Client{Transport: tr}
			}
			url := "http://" + ln.Addr().String() + "/bench"
			var next sync.Mutex
			n := 0
			b.ReportAllocs()
			b.SetParallelism(8) // 8 x GOMAXPROCS goroutines, spread over the connections
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				next.Lock()
				cl := clients[n%conns]
				n++
				next.Unlock()
				for pb.Next() {
					res, err := cl.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			_ = ln.Close()
			for _, cl := range clients {
				cl.CloseIdleConnections()
			}
		})
	}
}

// BenchmarkServeRaw measures the server alone: each parallel client is one
// connection driven by a bare Framer that sends 10 GETs at a time (like
// h2load -m10) and reads the responses without decoding them; allocations
// are then nearly all the server's.
//
//	go test -run '^$' -bench BenchmarkServeRaw -benchmem -count 5 ./l7/h2
func BenchmarkServeRaw(b *testing.B) {
	for _, srv := range benchServers() {
		b.Run(srv.name, func(b *testing.B) {
			ln := benchListen(b, srv.serveConn)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				nc, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				defer nc.Close()
				bw := bufioWriter(nc)
				fr := http2.NewFramer(bw, bufioReader(nc))
				_, _ = bw.Write([]byte(http2.ClientPreface))
				_ = fr.WriteSettings()
				var hb bytesBuffer
				enc := newEncoder(&hb)
				id := uint32(1)
				consumed := uint32(0)
				for more := true; more; {
					batch := 0
					for ; batch < 10; batch++ {
						if more = pb.Next(); !more {
							break
						}
						hb.Reset()
						for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "bench"}, {":path", "/bench"}} {
							_ = enc.WriteField(hpackField(kv[0], kv[1]))
						}
						_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
						id += 2
					}
					if consumed > 0 {
						_ = fr.WriteWindowUpdate(0, consumed)
						consumed = 0
					}
					if err := bw.Flush(); err != nil {
						b.Error(err)
						return
					}
					for done := 0; done < batch; {
						f, err := fr.ReadFrame()
						if err != nil {
							b.Error(err)
							return
						}
						switch f := f.(type) {
						case *http2.DataFrame:
							consumed += f.Length
							if f.StreamEnded() {
								done++
							}
						case *http2.HeadersFrame:
							if f.StreamEnded() {
								done++
							}
						case *http2.SettingsFrame:
							if !f.IsAck() {
								_ = fr.WriteSettingsAck()
							}
						case *http2.GoAwayFrame:
							b.Errorf("GOAWAY %v", f.ErrCode)
							return
						}
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// benchServer is one of the servers the benchmarks compare.
type benchServer struct {
	name      string
	serveConn func(net.Conn)
}

// benchServers are rampart's server and x/net's, in the order the
// benchmarks run them, each answering every request "hello, world\n".
func benchServers() []benchServer {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello, world\n")
	})
	return []benchServer{
		{"rampart", (&Server{Handler: handler}).ServeConn},
		{"std", func(c net.Conn) { (&http2.Server{}).ServeConn(c, &http2.ServeConnOpts{Handler: handler}) }},
	}
}

// benchListen serves every connection accepted on a loopback listener with
// serveConn, each in a goroutine of its own; the listener closes at the end
// of the benchmark run.
func benchListen(b *testing.B, serveConn func(net.Conn)) net.Listener {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveConn(c)
		}
	}()
	return ln
}
