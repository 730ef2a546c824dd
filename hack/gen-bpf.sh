#!/usr/bin/env bash
# Regenerates bpf/'s BPF objects and Go bindings (bpf2go). Installs nothing.
# Needs clang (Debian: clang llvm libbpf-dev); bpftool is optional (inspection).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v llvm-strip >/dev/null 2>&1 || missing+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
if ((${#missing[@]})); then
  echo "hack/gen-bpf.sh: missing ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi
command -v bpftool >/dev/null 2>&1 || echo "hack/gen-bpf.sh: note: bpftool not found (only needed to inspect maps)" >&2
go generate ./bpf/...
echo "hack/gen-bpf.sh: regenerated bpf/rampart_bpfel.{go,o}"
