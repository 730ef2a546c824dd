package handoff

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestHandOffListeningSockets(t *testing.T) {
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	var gen atomic.Uint64
	gen.Store(1)
	path := filepath.Join(t.TempDir(), "handoff.sock")
	srv := &Server{Path: path, Sockets: func(since uint64) (uint64, []Socket) {
		g := gen.Load()
		if g == since {
			return g, nil
		}
		tf, _ := tln.(*net.TCPListener).File()
		uf, _ := uc.File()
		return g, []Socket{{Listener: "https", Network: "tcp", Addr: tln.Addr().String(), File: tf},
			{Listener: "https", Network: "udp", Addr: uc.LocalAddr().String(), File: uf}}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	g, socks, changed, err := Fetch(ctx, path, 0)
	if err != nil || !changed || g != 1 || len(socks) != 2 {
		t.Fatalf("fetch: %d %v %v %v", g, socks, changed, err)
	}
	// The received descriptor is the same listening socket.
	fl, err := net.FileListener(socks[0].File)
	if err != nil {
		t.Fatal(err)
	}
	socks[0].File.Close()
	defer fl.Close()
	go func() {
		c, err := net.Dial("tcp", tln.Addr().String())
		if err == nil {
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	_ = fl.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))  // a liveness bound
	_ = tln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	acceptedBy := make(chan string, 2)
	go func() {
		if c, err := fl.Accept(); err == nil {
			c.Close()
			acceptedBy <- "copy"
		}
	}()
	go func() {
		if c, err := tln.Accept(); err == nil {
			c.Close()
			acceptedBy <- "original"
		}
	}()
	select {
	case <-acceptedBy: // either copy: one socket, two descriptors
	case <-time.After(30 * time.Second):
		t.Fatal("no accept on the shared socket")
	}
	if socks[1].Network != "udp" || socks[1].Addr != uc.LocalAddr().String() {
		t.Errorf("udp socket: %+v", socks[1])
	}
	socks[1].File.Close()
	// Same generation: nothing is sent.
	g, socks, changed, err = Fetch(ctx, path, 1)
	if err != nil || changed || socks != nil || g != 1 {
		t.Fatalf("unchanged fetch: %d %v %v %v", g, socks, changed, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode: %v %v", fi, err)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop on cancel")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("socket file left behind")
	}
}

func TestFetchWithoutServer(t *testing.T) {
	if _, _, _, err := Fetch(context.Background(), filepath.Join(t.TempDir(), "none.sock"), 0); err == nil {
		t.Fatal("fetch from nothing succeeded")
	}
}

// Handing a socket off must leave the proxy's own listener non-blocking
// (File.Fd would switch the shared file description to blocking).
func TestHandOffKeepsListenerNonBlocking(t *testing.T) {
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	path := filepath.Join(t.TempDir(), "h.sock")
	srv := &Server{Path: path, Sockets: func(since uint64) (uint64, []Socket) {
		f, _ := tln.(*net.TCPListener).File()
		return 1, []Socket{{Listener: "l", Network: "tcp", Addr: tln.Addr().String(), File: f}}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx)
	var socks []Socket
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, s, _, err := Fetch(ctx, path, 0)
		if err == nil {
			socks = s
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, s := range socks {
		s.File.Close()
	}
	// A blocking listener would ignore this deadline and Accept would hang.
	_ = tln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	done := make(chan error, 1)
	go func() { _, err := tln.Accept(); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("accepted a connection nobody made")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Accept ignored its deadline: the listener was switched to blocking mode")
	}
}
