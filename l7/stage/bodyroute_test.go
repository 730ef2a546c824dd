package stage

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// bodyRouteStage builds the stage of route "hooks" (field event_type,
// cases order.created → orders) with a handoff that records the route and
// reads the body it was given.
func bodyRouteStage(tb testing.TB, got *[]byte, to *int32) Stage {
	routes := []snapshot.Route{
		{ID: "hooks", BodyRoute: &snapshot.BodyRoute{Field: "event_type", MaxBodyBytes: 1 << 20, Cases: map[string]string{"order.created": "orders"}}},
		{ID: "orders"},
	}
	env := &Env{Snap: &snapshot.Snapshot{Config: &snapshot.Config{Routes: routes}}, Metrics: NewMetrics(prometheus.NewRegistry()),
		Handoff: func(x *Exchange, i int32) {
			*to = i
			x.Route = &routes[i]
			*got, _ = io.ReadAll(x.R.Body)
		}}
	s, err := buildBodyRoute(&Route{Config: &routes[0]}, env)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func webhook(kib int) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"id":"evt_1","payload":{`)
	for i := 0; buf.Len() < kib<<10-64; i++ {
		fmt.Fprintf(&buf, `"k%d":{"n":%d,"s":"some text here","a":[1,2,true,null]},`, i, i)
	}
	buf.WriteString(`"z":0},"event_type":"order.created"}`)
	return buf.Bytes()
}

func TestBodyRouteHandsOverTheBodyUnchanged(t *testing.T) {
	var got []byte
	to := int32(-1)
	s := bodyRouteStage(t, &got, &to)
	body := webhook(4)
	req := httptest.NewRequest("POST", "/hooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	x := &Exchange{W: httptest.NewRecorder(), R: req, Log: &accesslog.Entry{ReqID: "r"}}
	if v := s.Serve(x); v != Replied || to != 1 || !bytes.Equal(got, body) || req.ContentLength != int64(len(body)) {
		t.Fatalf("verdict %v, handed to %d, body equal %v, Content-Length %d of %d", v, to, bytes.Equal(got, body), req.ContentLength, len(body))
	}
}

// BenchmarkBodyRouteStage is the whole stage per request: read the body
// into memory, find the field (last, after the payload), hand over a reader
// of it. Bytes/s from -benchmem's MB/s; divide ns/op by the KiB.
func BenchmarkBodyRouteStage(b *testing.B) {
	for _, kib := range []int{1, 16, 64} {
		body := webhook(kib)
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			var got []byte
			var to int32
			s := bodyRouteStage(b, &got, &to)
			w := httptest.NewRecorder()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", "/hooks", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				x := &Exchange{W: w, R: req, Log: &accesslog.Entry{ReqID: "r"}}
				if s.Serve(x) != Replied || to != 1 {
					b.Fatal("not handed over")
				}
			}
		})
	}
}
