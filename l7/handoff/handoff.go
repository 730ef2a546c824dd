// Package handoff passes the proxy's listening sockets to the node agent
// over a unix socket (SCM_RIGHTS), so the agent can steer VIP traffic to
// them with sk_lookup while the proxy binds one address. It is the only
// code the proxy and the agent share.
//
// The protocol: the agent connects and writes "SINCE <generation>\n"; the
// proxy answers with one JSON line {"generation":N,"sockets":[...]} and,
// when the generation differs from the one asked about, the sockets'
// descriptors in the same message (SCM_RIGHTS, in the order listed). The
// generation changes whenever the proxy's set of listening sockets does.
package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Socket is one listening socket of the proxy.
type Socket struct {
	Listener string   `json:"listener"` // the snapshot listener's name
	Network  string   `json:"network"`  // "tcp" or "udp"
	Addr     string   `json:"addr"`     // the bound address
	File     *os.File `json:"-"`        // a duplicate of the descriptor; the receiver closes it
}

type reply struct {
	Generation uint64   `json:"generation"`
	Sockets    []Socket `json:"sockets"`
	Unchanged  bool     `json:"unchanged,omitempty"`
}

// MaxSockets bounds one message.
const MaxSockets = 64

// Server answers agents on a unix socket.
type Server struct {
	Path string
	// Sockets returns the current generation and, only when the generation
	// differs from since, duplicated descriptors (the server closes them
	// after sending).
	Sockets func(since uint64) (generation uint64, socks []Socket)
}

// Run serves until ctx ends. The socket file is created with mode 0660
// (replacing a stale one) and removed on return.
func (s *Server) Run(ctx context.Context) error {
	_ = os.Remove(s.Path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.Path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("handoff: listen on %s: %w", s.Path, err)
	}
	if err := os.Chmod(s.Path, 0o660); err != nil {
		ln.Close()
		return fmt.Errorf("handoff: chmod %s: %w", s.Path, err)
	}
	// The path is removed on return only while it is still this socket: after
	// a graceful re-exec the new process has bound its own there.
	mine, _ := os.Stat(s.Path)
	ln.SetUnlinkOnClose(false)
	go func() { <-ctx.Done(); ln.Close() }()
	defer func() {
		if now, err := os.Stat(s.Path); err == nil && mine != nil && os.SameFile(mine, now) {
			_ = os.Remove(s.Path)
		}
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("handoff: accept: %w", err)
		}
		go s.serve(c)
	}
}

func (s *Server) serve(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil {
		return
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(line), "SINCE ")
	since, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil {
		return
	}
	gen, socks := s.Sockets(since)
	defer func() {
		for _, sk := range socks {
			if sk.File != nil {
				sk.File.Close()
			}
		}
	}()
	r := reply{Generation: gen, Sockets: socks, Unchanged: gen == since}
	if len(socks) > MaxSockets {
		return
	}
	var fds []int
	if !r.Unchanged {
		// Not File.Fd: it would switch the descriptor to blocking mode, and
		// a duplicate shares that flag with the proxy's own listener.
		for _, sk := range socks {
			rc, err := sk.File.SyscallConn()
			if err != nil {
				return
			}
			_ = rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
		}
	} else {
		r.Sockets = nil
	}
	msg, _ := json.Marshal(r)
	msg = append(msg, '\n')
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	_, _, _ = c.WriteMsgUnix(msg, oob, nil)
}

// Fetch asks the proxy at path for its sockets. changed is false (and
// socks nil) when the generation is still since.
func Fetch(ctx context.Context, path string, since uint64) (gen uint64, socks []Socket, changed bool, err error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, nil, false, fmt.Errorf("handoff: connect to %s: %w", path, err)
	}
	c := nc.(*net.UnixConn)
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := fmt.Fprintf(c, "SINCE %d\n", since); err != nil {
		return 0, nil, false, fmt.Errorf("handoff: ask: %w", err)
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*MaxSockets))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, nil, false, fmt.Errorf("handoff: read: %w", err)
	}
	var files []*os.File
	if oobn > 0 {
		cmsgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return 0, nil, false, fmt.Errorf("handoff: control message: %w", err)
		}
		for _, cm := range cmsgs {
			fds, err := syscall.ParseUnixRights(&cm)
			if err != nil {
				return 0, nil, false, fmt.Errorf("handoff: rights: %w", err)
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "handoff"))
			}
		}
	}
	var r reply
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(buf[:n]))), &r); err != nil {
		closeAll(files)
		return 0, nil, false, fmt.Errorf("handoff: malformed reply: %w", err)
	}
	if r.Unchanged {
		closeAll(files)
		return r.Generation, nil, false, nil
	}
	if len(files) != len(r.Sockets) {
		closeAll(files)
		return 0, nil, false, errors.New("handoff: descriptor count does not match the sockets listed")
	}
	for i := range r.Sockets {
		r.Sockets[i].File = files[i]
	}
	return r.Generation, r.Sockets, true, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
