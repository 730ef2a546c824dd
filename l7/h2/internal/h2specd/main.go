// Command h2specd serves l7/h2 (or x/net's server with -std) in cleartext
// with prior knowledge, for running the h2spec conformance suite against it:
//
//	go run ./l7/h2/internal/h2specd -addr 127.0.0.1:8443 &
//	h2spec -h 127.0.0.1 -p 8443 -P /
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"net/http"

	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/h2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "listen address")
	std := flag.Bool("std", false, "serve with x/net/http2's server instead")
	flag.Parse()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "hello from h2specd\n")
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	s := &h2.Server{Handler: handler}
	std2 := &http2.Server{}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		if *std {
			go std2.ServeConn(c, &http2.ServeConnOpts{Handler: handler})
		} else {
			go s.ServeConn(c)
		}
	}
}
