#!/usr/bin/env bash
# perf/cache.sh — the response cache's cost: requests per proxy CPU-second for a cache hit, a
# miss through the cache, and a plain forward, rampart vs nginx's proxy_cache, in one run.
#
# Both proxies terminate TLS (the same P-256 certificate, TLS 1.3) in front of one upstream (a
# 1-worker nginx answering a ~100-byte body), pinned to the same CPU (taskset: rampart then runs
# with GOMAXPROCS=1, nginx with one worker); wrk and the upstream share the other CPU. Paths:
#   /hit     cacheable for 10 min: after a warm-up every request is a hit
#   /nostore the upstream says Cache-Control: no-store: every request goes through the cache
#            stage and upstream (a miss that is never stored)
#   /fwd     a route without a cache: the plain forward, for reference
# nginx: proxy_cache with proxy_cache_valid 200 10m on /hit and /nostore, no cache on /fwd.
# Interleaved rounds of DURATION each (wrk -t1 -cCONNS, keep-alive); the figure is requests per
# proxy CPU-second (utime+stime of the proxy's processes); the summary gives medians and min–max.
#
# Knobs: DURATION=5 ROUNDS=3 CONNS=32 PROXY_CPU=0 LOAD_CPU=1 RAMPART=path KEEP=1
#        PPROF=1: a CPU profile of rampart during each path's first run, kept as
#        perf/results/cache-PATH.pprof (go tool pprof -top perf/results/cache-PATH.pprof)
#        ports 18643 (rampart) 18644 (nginx) 18681 (upstream) 19961 (rampart admin)
set -euo pipefail
: "${DURATION:=5}" "${ROUNDS:=3}" "${CONNS:=32}" "${PROXY_CPU:=0}" "${LOAD_CPU:=1}"
RP=18643 NP=18644 UP=18681 AP=19961
name=cache.sh tools=(nginx wrk openssl taskset curl) ports=($RP $NP $UP $AP)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
body='rampart perf upstream: a fixed response body of about one hundred bytes for cache benchmarks....'
mkdir -p np/cache
nginx_conf up "worker_processes 1; events { worker_connections 4096; } http { access_log off; keepalive_requests 10000000;
  server { listen 127.0.0.1:$UP; default_type text/plain;
    location /nostore { add_header Cache-Control no-store; return 200 \"$body\"; }
    location / { return 200 \"$body\"; } } }"
taskset -c "$LOAD_CPU" nginx -p "$work/up/" -c "$work/up/nginx.conf" -e "$work/up/error.log" & pids+=($!)
wait_ok "http://127.0.0.1:$UP/hit"
nginx_conf np "worker_processes 1; events { worker_connections 4096; } http { access_log off; keepalive_requests 10000000;
  proxy_cache_path $work/np/cache levels=1 keys_zone=c:10m max_size=256m inactive=1h;
  upstream b { server 127.0.0.1:$UP; keepalive 64; }
  server { listen 127.0.0.1:$NP ssl; ssl_certificate $work/tls.crt; ssl_certificate_key $work/tls.key;
    ssl_protocols TLSv1.3; ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    proxy_http_version 1.1; proxy_set_header Connection \"\";
    location /fwd { proxy_pass http://b; }
    location / { proxy_pass http://b; proxy_cache c; proxy_cache_valid 200 10m; add_header X-Cache \$upstream_cache_status; } } }"
taskset -c "$PROXY_CPU" nginx -p "$work/np/" -c "$work/np/nginx.conf" -e "$work/np/error.log" & nginx_pid=$!; pids+=($nginx_pid)
"$RAMPART" keygen -out snap >/dev/null
mkdir -p r/snapshots r/state
cat >r/rampart.yaml <<CFG
version: {epoch: 1, sequence: 1}
listeners:
  - {name: https, address: "127.0.0.1:$RP", protocols: [http1], tls: {min_version: "1.3", certificates: [{cert_file: $work/tls.crt, key_file: $work/tls.key}]}}
clusters:
  - {name: up, endpoints: [{address: "127.0.0.1:$UP", weight: 1}]}
routes:
  - {id: hit, host: "*", methods: [GET], path_template: /hit, upstream_cluster: up, timeout_ms: 5000, cache: {ttl_ms: 600000}}
  - {id: nostore, host: "*", methods: [GET], path_template: /nostore, upstream_cluster: up, timeout_ms: 5000, cache: {ttl_ms: 600000}}
  - {id: fwd, host: "*", methods: [GET], path_template: /fwd, upstream_cluster: up, timeout_ms: 5000}
CFG
"$RAMPART" snapshot build -config r/rampart.yaml -key snap.key -out r/snapshots/1.snap >/dev/null
taskset -c "$PROXY_CPU" "$RAMPART" proxy -snapshot-dir r/snapshots -state-dir r/state -public-key snap.pub \
  -admin 127.0.0.1:$AP -access-log off ${PPROF:+-pprof} >rampart.log 2>&1 & rampart_pid=$!; pids+=($rampart_pid)
wait_ok "http://127.0.0.1:$AP/readyz"
for p in $RP $NP; do for path in /hit /nostore /fwd; do wait_ok "https://127.0.0.1:$p$path"; done; done
# the warm-up made /hit a hit on both; show what each answers
hdr() { curl -sk -o /dev/null -D - "$1" | tr -d '\r' | grep -iE "^($2):" | tr '\n' ' '; }
pids_of() { case $1 in rampart) echo $rampart_pid ;; nginx) echo $nginx_pid $(pgrep -P $nginx_pid) ;; esac; }
port_of() { case $1 in rampart) echo $RP ;; nginx) echo $NP ;; esac; }
hz=$(getconf CLK_TCK)
declare -A res
echo "# perf/cache.sh $(date -u +%FT%TZ) DURATION=${DURATION}s ROUNDS=$ROUNDS CONNS=$CONNS; proxy CPU $PROXY_CPU, wrk+upstream CPU $LOAD_CPU; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(nginx -v 2>&1 | sed 's/.*: //'), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), rampart $(git -C "$root" rev-parse --short HEAD)"
echo "# rampart /hit: $(hdr "https://127.0.0.1:$RP/hit" cache-status)  /nostore: $(hdr "https://127.0.0.1:$RP/nostore" cache-status)"
echo "# nginx   /hit: $(hdr "https://127.0.0.1:$NP/hit" x-cache)  /nostore: $(hdr "https://127.0.0.1:$NP/nostore" x-cache)"
printf '%-6s %-8s %-8s %10s %8s %12s %9s\n' round path proxy requests cpu_s req/cpu_s p99
for r in $(seq "$ROUNDS"); do
  for path in hit nostore fwd; do
    for px in rampart nginx; do
      ps=$(pids_of $px)
      t0=$(ticks $ps)
      if [ -n "${PPROF:-}" ] && [ $px = rampart ] && [ $r = 1 ]; then
        mkdir -p "$root/perf/results"
        (curl -s -o "$root/perf/results/cache-$path.pprof" "http://127.0.0.1:$AP/debug/pprof/profile?seconds=$((DURATION > 2 ? DURATION - 1 : 1))" &)
      fi
      out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "https://127.0.0.1:$(port_of $px)/$path" 2>&1)
      t1=$(ticks $ps)
      n=$(awk '/requests in/{print $1; exit}' <<<"$out")
      p99=$(awk '$1=="99%"{print $2; exit}' <<<"$out")
      bad=$(awk '/Non-2xx|Socket errors/{print}' <<<"$out")
      [ -n "$n" ] || { echo "$out" >&2; die "wrk against $px/$path printed no count"; }
      [ -z "$bad" ] || { echo "$out" >&2; die "wrk against $px/$path: $bad"; }
      cpu=$(awk -v d=$((t1 - t0)) -v hz=$hz 'BEGIN{printf "%.3f", d/hz}')
      rate=$(awk -v n=$n -v c=$cpu 'BEGIN{ if (c > 0) printf "%.0f", n/c; else print "inf" }')
      res[$path.$px]+="$rate "
      printf '%-6s %-8s %-8s %10s %8s %12s %9s\n' $r $path $px $n $cpu $rate "$p99"
    done
  done
done
echo "# rampart's cache counters: $(curl -s "http://127.0.0.1:$AP/metrics" | grep -E '^rampart_cache_(hits|misses|coalesced)_total' | tr '\n' ' ')"
echo "# summary: requests per proxy CPU-second, median (min–max) over $ROUNDS rounds"
for path in hit nostore fwd; do
  line="$path:"
  for px in rampart nginx; do
    line+=$(tr ' ' '\n' <<<"${res[$path.$px]}" | grep . | sort -n | awk -v p=$px '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "  %s %.0f (%d–%d)", p, m, a[1], a[NR]}')
  done
  echo "$line"
done
