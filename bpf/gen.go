package bpf

// Regenerate the objects and bindings with hack/gen-bpf.sh (needs clang).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -target bpfel -type cfg rampart rampart.c -- -O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
