package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	gstatus "google.golang.org/grpc/status"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// grpcLab starts a real gRPC server (health and reflection services) as an
// h2c upstream and a client that reaches it through the proxy over TLS.
func grpcLab(t *testing.T) (*lab, *health.Server, *grpc.ClientConn) {
	t.Helper()
	l := newLab(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	c := l.config(ln.Addr().String())
	c.Clusters[0].Protocol = "h2c"
	c.Routes = []snapshot.Route{{ID: "grpc", Host: "*", Methods: []string{"POST"}, PathTemplate: "/{rest...}",
		UpstreamCluster: "app", TimeoutMs: 10000, RequestClass: "write", Idempotency: "none"}}
	l.apply(c)
	cc, err := grpc.NewClient(l.addr("https"), grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: l.roots, ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return l, hs, cc
}

func TestGRPCUnaryAndTrailers(t *testing.T) {
	_, hs, cc := grpcLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(cc)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}
	// An error travels in the trailers (grpc-status).
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"})
	if gstatus.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v, want NotFound", err)
	}
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	resp, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("svc: %v %v", resp, err)
	}
}

func TestGRPCServerStreaming(t *testing.T) {
	_, hs, cc := grpcLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first message: %v %v", first, err)
	}
	// A message pushed later arrives while the stream stays open.
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	second, err := w.Recv()
	if err != nil || second.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("second message: %v %v", second, err)
	}
}

func TestGRPCBidirectionalStreaming(t *testing.T) {
	_, _, cc := grpcLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		names := map[string]bool{}
		for _, s := range resp.GetListServicesResponse().GetService() {
			names[s.Name] = true
		}
		if !names["grpc.health.v1.Health"] {
			t.Fatalf("round %d: services %v", i, names)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
