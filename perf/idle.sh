#!/usr/bin/env bash
# perf/idle.sh — memory per idle keep-alive connection: proxy RSS growth with N idle TLS
# connections (one request each, then idle), HTTP/1.1 and HTTP/2, rampart vs nginx vs haproxy.
#
# haproxy counts two descriptors per connection (client and server side), so N is at most
# (open-file hard limit - 500) / 2 here. Each measurement starts the proxy afresh (RSS never shrinks back, so a second run on one
# process would read low), opens N connections with perf/idleconns, waits, and reads VmRSS of
# the proxy's processes. nginx runs 1 worker; haproxy 1 thread; rampart as configured. For
# rampart the wait is first for its next garbage collection (Go's forced one, up to 2 minutes
# after the set-up, as nothing allocates), then SETTLE; before it, RSS still holds the set-up's
# garbage, and a fixed SETTLE=130s read 28 or 39 KB per h2 connection at one commit.
#
# Knobs: N=10000 SETTLE=3s PROTOS="h1 h2" PROXIES="rampart nginx haproxy" RAMPART=path KEEP=1
#        RAMPART_H2=std|rampart (the snapshot's h2 server, when the proxy has the switch)
set -euo pipefail
: "${N:=10000}" "${SETTLE:=3s}" "${PROTOS:=h1 h2}" "${PROXIES:=rampart nginx haproxy}"
PORT=18743 UP=18781 AP=19971
name=idle.sh tools=(nginx haproxy openssl curl) ports=($PORT $UP $AP)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ulimit -n "$(ulimit -Hn)" # each process (client, proxy) needs N descriptors and some
lim=$(ulimit -n); [ "$lim" = unlimited ] && lim=1048576
[ "$lim" -gt $((N + 500)) ] || die "open-file limit $lim is too low for N=$N (raise the hard limit)"
if [[ " $PROXIES " == *" haproxy "* ]] && [ "$lim" -le $((2 * N + 500)) ]; then
  echo "# haproxy left out: it needs 2 descriptors per connection, $((2 * N + 500)) > the limit $lim" >&2
  PROXIES=${PROXIES//haproxy/}
fi
NGINX_RLIMIT=$lim
(cd "$root" && go build -o "$work/idleconns" ./perf/idleconns) || die "go build ./perf/idleconns"
nginx_conf up "worker_processes 1; events {} http { access_log off; server { listen 127.0.0.1:$UP; location / { return 200 \"ok\"; } } }"
nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
wait_ok "http://127.0.0.1:$UP/"
h2_listen=http2
nginx_conf np "worker_processes 1; events { worker_connections 19500; } http { access_log off; keepalive_timeout 600s; keepalive_requests 1000000;
  upstream b { server 127.0.0.1:$UP; keepalive 16; }
  server { listen 127.0.0.1:$PORT ssl $h2_listen; ssl_certificate $work/tls.crt; ssl_certificate_key $work/tls.key;
    location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection \"\"; } } }"
cat >haproxy.cfg <<CFG
global
  nbthread 1
  maxconn $((lim / 2 - 200))
defaults
  mode http
  maxconn $((lim / 2 - 200))
  timeout connect 5s
  timeout client 10m
  timeout server 30s
  timeout http-keep-alive 10m
frontend f
  bind 127.0.0.1:$PORT ssl crt $work/haproxy.pem alpn h2,http/1.1
  default_backend b
backend b
  http-reuse always
  server u 127.0.0.1:$UP
CFG
"$RAMPART" keygen -out snap >/dev/null
h2_server=""
[ -n "${RAMPART_H2:-}" ] && h2_server="h2_server: $RAMPART_H2,"
mkdir -p r/snapshots
cat >r/rampart.yaml <<CFG
version: {epoch: 1, sequence: 1}
listeners:
  - {name: https, address: "127.0.0.1:$PORT", protocols: [h2, http1], idle_timeout_ms: 600000, max_connections: 19500,
     $h2_server
     tls: {certificates: [{cert_file: $work/tls.crt, key_file: $work/tls.key}]}}
clusters:
  - {name: up, endpoints: [{address: "127.0.0.1:$UP", weight: 1}]}
routes:
  - {id: root, host: "*", methods: [GET], path_template: "/", upstream_cluster: up, timeout_ms: 5000}
CFG
"$RAMPART" snapshot build -config r/rampart.yaml -key snap.key -out r/snapshots/1.snap >/dev/null || die "snapshot build"
start() { # start PROXY -> sets ppids (the processes whose RSS counts)
  case $1 in
    nginx) nginx -p "$work/np/" -c "$work/np/nginx.conf" -e "$work/np/error.log" & proxy_pid=$! ;;
    haproxy) haproxy -db -f haproxy.cfg >haproxy.log 2>&1 & proxy_pid=$! ;;
    rampart) rm -rf r/state; mkdir -p r/state
      "$RAMPART" proxy -snapshot-dir r/snapshots -state-dir r/state -public-key snap.pub -admin 127.0.0.1:$AP -access-log off >rampart.log 2>&1 &
      proxy_pid=$! ;;
  esac
  pids+=($proxy_pid)
  wait_ok "https://127.0.0.1:$PORT/"
  ppids=$proxy_pid
  if [ "$1" = nginx ]; then ppids="$proxy_pid,$(pgrep -P $proxy_pid | paste -sd,)"; fi
}
stop() { kill "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true; for _ in $(seq 50); do ss -Htln "sport = :$PORT" | grep -q . || return 0; sleep 0.1; done; }
echo "# perf/idle.sh $(date -u +%FT%TZ) N=$N; $(nginx -v 2>&1 | sed 's/.*: //'), haproxy $(haproxy -v | awk 'NR==1{print $3}'), rampart $(git -C "$root" rev-parse --short HEAD)${RAMPART_H2:+ h2_server=$RAMPART_H2}"
printf '%-6s %-8s %8s %14s %14s %12s %10s\n' proto proxy conns rss_before_kB rss_after_kB per_conn_B gc_wait_s
declare -A per
for proto in $PROTOS; do
  for px in $PROXIES; do
    start $px
    gc=() # rampart: wait for its next GC after the set-up (see perf/idleconns), then SETTLE
    if [ "$px" = rampart ]; then gc=(-gc-metrics "http://127.0.0.1:$AP/metrics"); fi
    out=$("$work/idleconns" -addr 127.0.0.1:$PORT -n "$N" -proto $proto -pid "$ppids" -settle "$SETTLE" "${gc[@]}") || { echo "$out" >&2; die "idleconns against $px ($proto) failed"; }
    v() { awk -v k="$1:" '$1==k{print $2}' <<<"$out"; }
    per[$proto.$px]=$(v rss_per_conn_bytes)
    printf '%-6s %-8s %8s %14s %14s %12s %10s\n' $proto $px "$(v connections)" $(($(v rss_before_bytes) / 1024)) $(($(v rss_after_bytes) / 1024)) "${per[$proto.$px]}" "$(v gc_waited_s)"
    stop
  done
done
echo "# per idle connection (bytes of proxy RSS); rampart / nginx, the issue's bound is 2"
for proto in $PROTOS; do
  if [ -n "${per[$proto.rampart]:-}" ] && [ -n "${per[$proto.nginx]:-}" ]; then # both measured (PROXIES)
    echo "$proto: rampart ${per[$proto.rampart]} nginx ${per[$proto.nginx]} haproxy ${per[$proto.haproxy]:-?} ratio $(awk -v a=${per[$proto.rampart]} -v b=${per[$proto.nginx]} 'BEGIN{printf "%.2f", a/b}')"
  fi
done
