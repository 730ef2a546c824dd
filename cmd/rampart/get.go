package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// cmdGet is a tiny HTTP client for trying a listener by hand, mainly for
// HTTP/3: Debian 12's curl is built without it. It wires net/http (h1/h2)
// or quic-go's http3.Transport; it holds no logic of its own.
func cmdGet(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	h3 := fs.Bool("http3", false, "use HTTP/3 (QUIC); otherwise HTTP/1.1 or HTTP/2 as negotiated")
	caFile := fs.String("cacert", "", "PEM file of the CA (or self-signed certificate) to trust")
	insecure := fs.Bool("k", false, "do not verify the server's certificate")
	include := fs.Bool("i", false, "print the status line and response headers")
	timeout := fs.Duration("timeout", 10*time.Second, "whole-request timeout")
	var headers headerList
	fs.Var(&headers, "H", `request header "Name: value" (repeatable)`)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rampart get [-http3] [-cacert F | -k] [-i] [-H 'Name: value']... URL")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one URL")
	}
	tlsConf := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // -k is the operator's explicit choice
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("read -cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-cacert %s: no PEM certificate in it", *caFile)
		}
		tlsConf.RootCAs = pool
	}
	var rt http.RoundTripper
	if *h3 {
		t := &http3.Transport{TLSClientConfig: tlsConf}
		defer t.Close()
		rt = t
	} else {
		t := &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}
		defer t.CloseIdleConnections()
		rt = t
	}
	req, err := http.NewRequest(http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return fmt.Errorf("url %q: %w", fs.Arg(0), err)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return fmt.Errorf("-H %q: want \"Name: value\"", h)
		}
		req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	client := &http.Client{Transport: rt, Timeout: *timeout}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if *include {
		fmt.Printf("%s %s\n", resp.Proto, resp.Status)
		names := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, v := range resp.Header[k] {
				fmt.Printf("%s: %s\n", k, v)
			}
		}
		fmt.Println()
	}
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }
