#!/usr/bin/env bash
# perf/tls.sh — TLS handshakes per proxy CPU-second: rampart vs nginx vs haproxy, in one run.
#
# Each proxy terminates TLS with the same P-256 certificate in front of one upstream (a 1-worker
# nginx), pinned to the same single CPU (taskset; rampart then runs with GOMAXPROCS=1, nginx with
# one worker, haproxy with one thread); the load tool (openssl s_time) runs on the other CPU. In
# interleaved rounds every proxy gets, for DURATION each:
#   full    `openssl s_time -new`:   a new connection and a full TLS 1.3 handshake per GET
#   resumed `openssl s_time -reuse`: a new connection per GET, resuming the first session's ticket
# The figure is connections per proxy CPU-second (utime+stime from /proc/PID/stat, the proxy's
# processes only); the summary gives each proxy's median and min–max over the rounds.
#
# Knobs: DURATION=5 ROUNDS=3 PROXY_CPU=0 LOAD_CPU=1 RAMPART=path KEEP=1
#        ports 18543 (rampart) 18544 (nginx) 18545 (haproxy) 18581 (upstream) 19951 (rampart admin)
set -euo pipefail
: "${DURATION:=5}" "${ROUNDS:=3}" "${PROXY_CPU:=0}" "${LOAD_CPU:=1}"
RP=18543 NP=18544 HP=18545 UP=18581 AP=19951
name=tls.sh tools=(nginx haproxy openssl taskset curl) ports=($RP $NP $HP $UP $AP)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
nginx_conf up "worker_processes 1; events {} http { access_log off; server { listen 127.0.0.1:$UP; location / { return 200 \"ok\"; } } }"
taskset -c "$LOAD_CPU" nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
wait_ok "http://127.0.0.1:$UP/"
nginx_conf np "worker_processes 1; events {} http { access_log off;
  upstream b { server 127.0.0.1:$UP; keepalive 16; }
  server { listen 127.0.0.1:$NP ssl; ssl_certificate $work/tls.crt; ssl_certificate_key $work/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m; ssl_session_timeout 1h;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection \"\"; } } }"
taskset -c "$PROXY_CPU" nginx -p "$work/np/" -c "$work/np/nginx.conf" -e "$work/np/error.log" & nginx_pid=$!; pids+=($nginx_pid)
cat >haproxy.cfg <<CFG
global
  nbthread 1
  tune.ssl.default-dh-param 2048
  ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend f
  bind 127.0.0.1:$HP ssl crt $work/haproxy.pem alpn http/1.1
  default_backend b
backend b
  http-reuse always
  server u 127.0.0.1:$UP
CFG
taskset -c "$PROXY_CPU" haproxy -db -f haproxy.cfg >haproxy.log 2>&1 & haproxy_pid=$!; pids+=($haproxy_pid)
"$RAMPART" keygen -out snap >/dev/null
mkdir -p r/snapshots r/state
cat >r/rampart.yaml <<CFG
version: {epoch: 1, sequence: 1}
listeners:
  - {name: https, address: "127.0.0.1:$RP", protocols: [http1], tls: {certificates: [{cert_file: $work/tls.crt, key_file: $work/tls.key}]}}
clusters:
  - {name: up, endpoints: [{address: "127.0.0.1:$UP", weight: 1}]}
routes:
  - {id: all, host: "*", methods: [GET], path_template: "/{p...}", upstream_cluster: up, timeout_ms: 5000}
  - {id: root, host: "*", methods: [GET], path_template: "/", upstream_cluster: up, timeout_ms: 5000}
CFG
"$RAMPART" snapshot build -config r/rampart.yaml -key snap.key -out r/snapshots/1.snap >/dev/null
taskset -c "$PROXY_CPU" "$RAMPART" proxy -snapshot-dir r/snapshots -state-dir r/state -public-key snap.pub \
  -admin 127.0.0.1:$AP -access-log off >rampart.log 2>&1 & rampart_pid=$!; pids+=($rampart_pid)
wait_ok "http://127.0.0.1:$AP/readyz"
for p in $RP $NP $HP; do wait_ok "https://127.0.0.1:$p/"; done
pids_of() { case $1 in rampart) echo $rampart_pid ;; haproxy) echo $haproxy_pid ;; nginx) echo $nginx_pid $(pgrep -P $nginx_pid) ;; esac; }
port_of() { case $1 in rampart) echo $RP ;; haproxy) echo $HP ;; nginx) echo $NP ;; esac; }
hz=$(getconf CLK_TCK)
declare -A res
echo "# perf/tls.sh $(date -u +%FT%TZ) DURATION=${DURATION}s ROUNDS=$ROUNDS proxy CPU $PROXY_CPU, s_time on CPU $LOAD_CPU; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(nginx -v 2>&1 | sed 's/.*: //'), haproxy $(haproxy -v | awk 'NR==1{print $3}'), $(openssl version | cut -d' ' -f1-2), rampart $(git -C "$root" rev-parse --short HEAD)"
printf '%-6s %-8s %-8s %10s %8s %12s %s\n' round mode proxy conns cpu_s conns/cpu_s resumed
for r in $(seq "$ROUNDS"); do
  for mode in full resumed; do
    flag=-new; [ $mode = resumed ] && flag=-reuse
    for px in rampart nginx haproxy; do
      ps=$(pids_of $px)
      t0=$(ticks $ps)
      out=$(taskset -c "$LOAD_CPU" openssl s_time -connect 127.0.0.1:$(port_of $px) $flag -time "$DURATION" -www / 2>&1 || true)
      t1=$(ticks $ps)
      # "N connections in T real seconds" is the timed run; the reuse run repeats after the first session
      n=$(awk '/connections in [0-9.]+ real seconds/{print $1; exit}' <<<"$out")
      # s_time prints one character per connection: 'r' resumed, '*' full
      reused=$(awk 'NR>1 && /^[r*]+$/' <<<"$out" | tr -cd r | wc -c)
      [ -n "$n" ] || { echo "$out" >&2; die "s_time against $px printed no count"; }
      cpu=$(awk -v d=$((t1 - t0)) -v hz=$hz 'BEGIN{printf "%.3f", d/hz}')
      rate=$(awk -v n=$n -v c=$cpu 'BEGIN{ if (c > 0) printf "%.0f", n/c; else print "inf" }')
      res[$mode.$px]+="$rate "
      printf '%-6s %-8s %-8s %10s %8s %12s %s\n' $r $mode $px $n $cpu $rate "$reused"
    done
  done
done
echo "# summary: connections per proxy CPU-second, median (min–max) over $ROUNDS rounds"
for mode in full resumed; do
  line="$mode:"
  for px in rampart nginx haproxy; do
    line+=$(tr ' ' '\n' <<<"${res[$mode.$px]}" | grep . | sort -n | awk -v p=$px '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "  %s %.0f (%d–%d)", p, m, a[1], a[NR]}')
  done
  echo "$line"
done
