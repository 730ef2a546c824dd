#!/usr/bin/env bash
# perf/compare.sh — rampart vs nginx as a TLS reverse proxy, in one run.
#
# Both proxies front the same upstream (a separate 1-worker nginx returning a ~100 byte body)
# with the same certificate, and are loaded in interleaved rounds. The figure of merit is
# requests per proxy CPU-second (utime+stime of the proxy's processes, from /proc/PID/stat),
# which is robust to the load generator and upstream sharing the 2 cores. See perf/README.md.
#
# Protocols: h1 (wrk), h2 (h2load), h3 (perf/h3load, rampart only: nginx 1.22 has no HTTP/3),
# or all three in one run (PROTO=all), each with its own interleaved rounds.
#
# Knobs (env): DURATION=10s CONNS=64 STREAMS=10 THREADS=2 ROUNDS=3 PROTO=h1|h2|h3|all
#              RAMPART=path H3LOAD=path KEEP=1 RAMPART_PROTOCOLS="h2, http1, h3"
#              PORTS: RAMPART_PORT=18443 NGINX_PORT=18444 UPSTREAM_PORT=18081 ADMIN_PORT=19901
set -euo pipefail

: "${DURATION:=10s}" "${CONNS:=64}" "${STREAMS:=10}" "${THREADS:=2}" "${ROUNDS:=3}" "${PROTO:=h1}"
: "${RAMPART_PORT:=18443}" "${NGINX_PORT:=18444}" "${UPSTREAM_PORT:=18081}" "${ADMIN_PORT:=19901}"
# rampart's listener serves h3 in every run, so h1/h2 figures don't depend on PROTO; its h1/h2
# responses then carry an Alt-Svc header, which wrk and h2load ignore. Drop h3 here to compare.
: "${RAMPART_PROTOCOLS:=h2, http1, h3}"
WARMUP=2s

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { # also marks the report (once there is one) as failed
  echo "compare.sh: $*" >&2
  if [ -n "${report:-}" ]; then echo "FAILED: $*" >>"$report"; fi
  exit 1
}

# ---- preflight: tools, knobs, free ports ------------------------------------------------
case "$PROTO" in h1 | h2 | h3) protos=("$PROTO") ;; all) protos=(h1 h2 h3) ;; *) die "PROTO must be h1, h2, h3 or all, not '$PROTO'" ;; esac
declare -A tool_of=([h1]=wrk [h2]=h2load [h3]=h3load)
needs=(nginx openssl curl ss pgrep)
for proto in "${protos[@]}"; do
  case $proto in
    h1 | h2) needs+=("${tool_of[$proto]}") ;;
    h3) [ -n "${H3LOAD:-}" ] || needs+=(go) ;; # perf/h3load is built below unless H3LOAD is given
  esac
done
for t in "${needs[@]}"; do
  command -v "$t" >/dev/null || die "missing '$t' (run: hack/deps.sh perf; curl/openssl: hack/deps.sh all)"
done
rampart_h3=false
if grep -qw h3 <<<"$RAMPART_PROTOCOLS"; then rampart_h3=true; fi
if [[ " ${protos[*]} " == *" h3 "* ]] && ! $rampart_h3; then die "PROTO=$PROTO needs h3 in RAMPART_PROTOCOLS"; fi
for p in "$RAMPART_PORT" "$NGINX_PORT" "$UPSTREAM_PORT" "$ADMIN_PORT"; do
  if ss -Htln "sport = :$p" | grep -q .; then die "port 127.0.0.1:$p is in use; free it or set the *_PORT knobs"; fi
done
# with h3, rampart also binds UDP on its port
if $rampart_h3 && ss -Huan "sport = :$RAMPART_PORT" | grep -q .; then
  die "UDP port 127.0.0.1:$RAMPART_PORT is in use (rampart's HTTP/3); free it or set RAMPART_PORT"
fi

# ---- work dir and cleanup ---------------------------------------------------------------
work=$(mktemp -d /tmp/rampart-compare.XXXXXX)
chmod 755 "$work" # nginx workers run as 'nobody' and need to reach their prefix dirs
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if ((rc != 0)); then # show what the servers said before the evidence is deleted
    for f in "$work"/rampart.log "$work"/*/error.log; do
      [ -s "$f" ] && { echo "--- tail $f" >&2; tail -n 20 "$f" >&2; }
    done
  fi
  if [ -n "${KEEP:-}" ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$root/perf/results"
report="$root/perf/results/compare-$(date +%Y%m%d-%H%M%S)-$PROTO.txt"
raw="$work/raw.txt" # every load tool's full output; appended to the report file at the end
: >"$raw"
say() { printf '%s\n' "$*" | tee -a "$report"; }

# ---- build rampart (and h3load), make the certificate and signing key ---------------------
if [ -z "${RAMPART:-}" ]; then
  RAMPART=$work/rampart
  (cd "$root" && go build -o "$RAMPART" ./cmd/rampart) || die "go build failed"
fi
RAMPART=$(realpath "$RAMPART")
if [[ " ${protos[*]} " == *" h3 "* ]]; then
  if [ -z "${H3LOAD:-}" ]; then
    H3LOAD=$work/h3load
    (cd "$root" && go build -o "$H3LOAD" ./perf/h3load) || die "go build ./perf/h3load failed"
  fi
  H3LOAD=$(realpath "$H3LOAD")
fi
cd "$work" # from here on, nothing the script runs can litter the repo
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
chmod 644 "$work/tls.key"
"$RAMPART" keygen -out "$work/snap" >/dev/null

wait_http() { # wait_http URL — until it answers 200, for up to 10 s
  for _ in $(seq 100); do
    [ "$(curl -sk -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = 200 ] && return 0
    sleep 0.1
  done
  die "$1 did not answer 200 within 10 s"
}

# nginx >= 1.25.1 spells HTTP/2 'http2 on;'; older ones put 'http2' on the listen line.
nginx_ver=$(nginx -v 2>&1 | sed 's|.*nginx/||')
if [ "$(printf '%s\n' 1.25.1 "$nginx_ver" | sort -V | head -1)" = 1.25.1 ]; then
  h2_listen="" h2_directive="http2 on;"
else
  h2_listen="http2" h2_directive=""
fi

start_nginx() { # start_nginx NAME CONFIG-BODY -> sets nginx_pid (master, daemon off)
  mkdir -p "$work/$1"
  printf 'daemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\n%s\n' \
    "$work/$1" "$work/$1" "$2" >"$work/$1/nginx.conf"
  nginx -t -q -p "$work/$1/" -c "$work/$1/nginx.conf" -e "$work/$1/error.log" || die "bad $1 config"
  nginx -p "$work/$1/" -c "$work/$1/nginx.conf" -e "$work/$1/error.log" &
  nginx_pid=$!
  pids+=("$nginx_pid")
}

# ---- 1. the shared upstream: one nginx worker, fixed ~100 byte body -----------------------
body='rampart perf upstream: a fixed response body of about one hundred bytes for proxy benchmarks..'
start_nginx upstream "worker_processes 1;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 10000000; keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$UPSTREAM_PORT;
    default_type text/plain;
    location / { return 200 \"$body\"; }
  }
}"
upstream_pid=$nginx_pid
wait_http "http://127.0.0.1:$UPSTREAM_PORT/bench"

# ---- 2. nginx as the TLS reverse proxy ----------------------------------------------------
start_nginx nginx-proxy "worker_processes auto;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 10000000; keepalive_timeout 300s;
  upstream backend { server 127.0.0.1:$UPSTREAM_PORT; keepalive 64; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$NGINX_PORT ssl $h2_listen;
    $h2_directive
    ssl_certificate $work/tls.crt; ssl_certificate_key $work/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    # AES-128-GCM first, as Go's server picks on AES-capable CPUs, so both do the same crypto.
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:SSL:10m; ssl_session_timeout 1h;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; }
  }
}"
wait_http "https://127.0.0.1:$NGINX_PORT/bench"

# ---- 3. rampart proxy from a signed snapshot ----------------------------------------------
cat >"$work/rampart.yaml" <<EOF
version: {epoch: 1, sequence: 1}
listeners:
  - name: https
    address: 127.0.0.1:$RAMPART_PORT
    protocols: [$RAMPART_PROTOCOLS]
    tls: {certificates: [{cert_file: $work/tls.crt, key_file: $work/tls.key}]}
clusters:
  - {name: bench, endpoints: [{address: "127.0.0.1:$UPSTREAM_PORT", weight: 1, region: local, zone: local-a}]}
routes:
  - {id: bench, host: "*", methods: [GET], path_template: /bench, upstream_cluster: bench, timeout_ms: 5000}
EOF
mkdir -p "$work/snapshots" "$work/state"
"$RAMPART" snapshot build -config "$work/rampart.yaml" -key "$work/snap.key" \
  -out "$work/snapshots/1.snap" >/dev/null || die "rampart snapshot build failed"
"$RAMPART" proxy -snapshot-dir "$work/snapshots" -state-dir "$work/state" \
  -public-key "$work/snap.pub" -admin "127.0.0.1:$ADMIN_PORT" -access-log off -drain-timeout 1s \
  >"$work/rampart.log" 2>&1 &
rampart_pid=$!
pids+=("$rampart_pid")
wait_http "http://127.0.0.1:$ADMIN_PORT/readyz"
wait_http "https://127.0.0.1:$RAMPART_PORT/bench"

# ---- measurement helpers --------------------------------------------------------------------
hz=$(getconf CLK_TCK)
proxy_port() { if [ "$1" = rampart ]; then echo "$RAMPART_PORT"; else echo "$NGINX_PORT"; fi; }
proxy_pids() { # the processes whose CPU we charge to a proxy: rampart, or nginx master+workers
  if [ "$1" = rampart ]; then echo "$rampart_pid"; else echo "$nginx_pid" $(pgrep -P "$nginx_pid"); fi
}
cpu_ticks() { # sum of utime+stime (stat fields 14, 15) over pids
  local t=0 p s f
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || { check_alive; die "process $p is gone"; }
    s=$(<"/proc/$p/stat")
    s=${s##*) } # drop "pid (comm) " — comm may hold spaces; field 3 is now f[0]
    read -ra f <<<"$s"
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; } # whole machine, not idle/iowait
child_ticks() { local s; s=$(<"/proc/$$/stat"); s=${s##*) }; read -ra s <<<"$s"; echo $((s[13] + s[14])); }
# Ticks of everything this benchmark runs: both proxies, the upstream, and (via this shell's
# cutime+cstime) the load tool once reaped. Machine busy time minus this is "other" work.
bench_ticks() { echo $(($(cpu_ticks "$rampart_pid" "$nginx_pid" $(pgrep -P "$nginx_pid") "$upstream_pid" $(pgrep -P "$upstream_pid")) + $(child_ticks))); }
# The load tool's CPU: this shell's reaped children, i.e. the load tool plus a few short helpers
# (date, the $(...) subshells) that cost well under a tick.
load_ticks() { child_ticks; }
check_alive() {
  local st=0 # on death, report the exit status (2: Go panic, 137: SIGKILL); cleanup shows the log
  kill -0 "$rampart_pid" 2>/dev/null || { wait "$rampart_pid" || st=$?; die "rampart proxy died, exit status $st"; }
  kill -0 "$nginx_pid" 2>/dev/null || die "nginx proxy died"
  kill -0 "$upstream_pid" 2>/dev/null || die "upstream nginx died"
}
load() { # load PROTO PORT DURATION — run the protocol's load tool; output on stdout
  case $1 in
    h1) wrk -t"$THREADS" -c"$CONNS" -d"$3" --latency "https://127.0.0.1:$2/bench" ;;
    h2) h2load -t"$THREADS" -c"$CONNS" -m "$STREAMS" -D "$3" "https://127.0.0.1:$2/bench" ;;
    h3) GOMAXPROCS=$THREADS "$H3LOAD" -c "$CONNS" -m "$STREAMS" -d "$3" "https://127.0.0.1:$2/bench" ;;
  esac
}
load_desc() { # load_desc PROTO — the load command, for the report
  case $1 in
    h1) echo "wrk -t$THREADS -c$CONNS -d$DURATION --latency" ;;
    h2) echo "h2load -t$THREADS -c$CONNS -m$STREAMS -D $DURATION" ;;
    h3) echo "h3load -c$CONNS -m$STREAMS -d$DURATION, GOMAXPROCS=$THREADS" ;;
  esac
}
# parse PROTO OUT-FILE -> "requests req_per_s errors" (errors: '-' when none, else a description)
parse() {
  case $1 in
    h1) awk '/ requests in /{n=$1} /^Requests\/sec:/{r=$2}
             /Non-2xx or 3xx responses:/{e=e "non-2xx/3xx=" $NF " "}
             /Socket errors:/{sub(/^ *Socket errors: */,""); gsub(/ /,""); e=e "socket:" $0 " "}
             END{print n+0, r+0, (e=="" ? "-" : e)}' "$2" ;;
    h2) # h2load: count requests that succeeded with a 2xx; report everything else
      awk '/^finished in/{r=$4} /^requests:/{f=$10; x=$12; to=$14}
           /^status codes:/{s2=$3; s3=$5; s4=$7; s5=$9}
           END{e=""; if (f+x+to>0) e=e "failed=" f+0 ",errored=" x+0 ",timeout=" to+0 " ";
               if (s3+s4+s5>0) e=e "3xx=" s3+0 ",4xx=" s4+0 ",5xx=" s5+0 " ";
               print s2+0, r+0, (e=="" ? "-" : e)}' "$2" ;;
    h3) # h3load: "requests:" counts 2xx; "non2xx:" and "errors:" the rest; "dials:" re-connects
      awk -v c="$CONNS" '/^requests:/{n=$2} /^req\/s:/{r=$2} /^dials:/{d=$2}
           /^non2xx:/{if ($2>0) e=e "non2xx=" $2 $3 $4 $5 $6 $7 " "} /^errors:/{if ($2>0) e=e "errors=" $2 " "}
           END{if (d>c) e=e "redials=" d-c " "; print n+0, r+0, (e=="" ? "-" : e)}' "$2" ;;
  esac
}

# ---- header -----------------------------------------------------------------------------------
tls_of() { # negotiated protocol/cipher/ALPN, to show both proxies speak the same TLS
  openssl s_client -connect "127.0.0.1:$1" -servername localhost -alpn h2,http/1.1 </dev/null 2>/dev/null |
    awk -F': *' '/^New,/{c=$0; sub(/^New, /,"",c)} /^ALPN protocol/{a=$2} END{print c ", ALPN " (a?a:"none")}'
}
h3_of() { # the same over QUIC (openssl s_client has no QUIC), from a short one-stream h3load probe
  local out
  out=$("$H3LOAD" -c 1 -m 1 -d 100ms "https://127.0.0.1:$1/bench" 2>&1) || { echo "$out" >&2; die "HTTP/3 probe of :$1 failed"; }
  awk '/^tls:/{sub(/^tls: */,""); print}' <<<"$out"
}
has_h3=false
if [[ " ${protos[*]} " == *" h3 "* ]]; then has_h3=true; fi
if nginx -V 2>&1 | grep -q http_v3_module; then
  nginx_h3="this script does not set up nginx's HTTP/3" nginx_h3_short="nginx's HTTP/3 not set up"
else
  nginx_h3="nginx $nginx_ver has no HTTP/3 (it came in 1.25, built with http_v3_module)"
  nginx_h3_short="no HTTP/3 in nginx $nginx_ver"
fi
say "rampart vs nginx — TLS reverse proxy, requests per proxy CPU-second"
say "date:     $(date -u +%FT%TZ)   host: $(uname -r), $(nproc) CPUs, CLK_TCK=$hz"
say "rampart:  $(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown) ($RAMPART)"
say "nginx:    $nginx_ver (proxy: worker_processes auto = $(($(pgrep -P "$nginx_pid" | wc -l))) workers; upstream: 1 worker)"
say "load:     PROTO=$PROTO rounds=$ROUNDS duration=$DURATION warm-up=$WARMUP, per protocol:"
for proto in "${protos[@]}"; do say "          $proto: $(load_desc "$proto")"; done
say "both:     access logs off, same ECDSA P-256 cert, same upstream 127.0.0.1:$UPSTREAM_PORT (keep-alive), GET /bench -> ${#body} byte body"
say "tls:      rampart :$RAMPART_PORT $(tls_of "$RAMPART_PORT")"
say "          nginx   :$NGINX_PORT $(tls_of "$NGINX_PORT")"
if $has_h3; then
  say "          rampart :$RAMPART_PORT/udp (HTTP/3) $(h3_of "$RAMPART_PORT")"
  say "h3:       $nginx_h3, so h3 rounds load rampart only and have no ratio"
fi
say "listener: rampart's protocols [$RAMPART_PROTOCOLS]"
if $rampart_h3; then # show what h1/h2 clients get told (wrk and h2load ignore it)
  altsvc=$(curl -sk -o /dev/null -D - "https://127.0.0.1:$RAMPART_PORT/bench" | tr -d '\r' | grep -i '^alt-svc:' || true)
  say "          h1/h2 responses carry '${altsvc:-no Alt-Svc header}' (wrk and h2load ignore it)"
fi
say ""

# ---- interleaved rounds, protocol by protocol ---------------------------------------------------
say "$(printf '%-5s %-5s %-8s %10s %10s %7s %5s %5s %11s %8s %6s  %s' \
  round proto proxy requests req/s cpu_s cpu% load% req/cpu_s us/req other% errors)"
declare -A eff # eff[proto/proxy] = list of requests-per-CPU-second, one per round
udp_errs() { awk '/^Udp: [0-9]/{print $6, $7}' /proc/net/snmp; } # RcvbufErrors SndbufErrors, whole host
read -r udp_rcv0 udp_snd0 < <(udp_errs)
for proto in "${protos[@]}"; do
  proxies=(rampart nginx)
  [ "$proto" = h3 ] && proxies=(rampart) # no HTTP/3 in nginx 1.22
  for proxy in "${proxies[@]}"; do # warm-up: connections, pools, caches
    load "$proto" "$(proxy_port "$proxy")" "$WARMUP" >"$work/warmup-$proto-$proxy.txt" 2>&1 ||
      { cat "$work/warmup-$proto-$proxy.txt" >&2; die "$proto warm-up against $proxy failed"; }
  done
  check_alive
  for round in $(seq "$ROUNDS"); do
    order=("${proxies[@]}") # alternate who goes first
    if ((round % 2 == 0 && ${#proxies[@]} == 2)); then order=(nginx rampart); fi
    for proxy in "${order[@]}"; do
      out="$work/run-$proto-$round-$proxy.txt"
      read -ra ps < <(proxy_pids "$proxy")
      b0=$(bench_ticks); m0=$(busy_ticks); l0=$(load_ticks); t0=$(cpu_ticks "${ps[@]}"); w0=$(date +%s.%N)
      load "$proto" "$(proxy_port "$proxy")" "$DURATION" >"$out" 2>&1 ||
        { cat "$out" >&2; die "${tool_of[$proto]} against $proxy failed"; }
      t1=$(cpu_ticks "${ps[@]}"); w1=$(date +%s.%N); l1=$(load_ticks); m1=$(busy_ticks); b1=$(bench_ticks)
      check_alive
      { echo "===== $proto round $round, $proxy: $(load_desc "$proto")"; cat "$out"; } >>"$raw"
      read -r n rps errs < <(parse "$proto" "$out")
      line=$(awk -v r="$round" -v pr="$proto" -v p="$proxy" -v n="$n" -v rps="$rps" -v dt=$((t1 - t0)) \
        -v hz="$hz" -v w0="$w0" -v w1="$w1" -v e="$errs" -v l=$((l1 - l0)) -v o=$(((m1 - m0) - (b1 - b0))) \
        'BEGIN{c=dt/hz; wall=w1-w0; eff=(c>0? n/c : 0); us=(n>0? c*1e6/n : 0)
               o=(o>0 ? 100*o/hz/wall : 0)
               printf "%-5s %-5s %-8s %10d %10.0f %7.2f %4.0f%% %4.0f%% %11.0f %8.1f %5.0f%%  %s\n",
                 r, pr, p, n, rps, c, 100*c/wall, 100*l/hz/wall, eff, us, o, e}')
      say "$line"
      eff[$proto/$proxy]+="$(awk '{print $9}' <<<"$line") "
      [ "$errs" = - ] || say "      !! $proxy returned errors over $proto in round $round: $errs"
    done
  done
done

# ---- summary ----------------------------------------------------------------------------------------
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
say ""
say "load%  = the load tool's CPU / wall time; other% = CPU used outside this benchmark (200% = both"
say "cores); if other% is more than a few %, other work competed for the CPUs: repeat on a quiet machine."
say ""
say "summary (PROTO=$PROTO, median of $ROUNDS rounds; requests per proxy CPU-second, us = proxy CPU per request):"
say "$(printf '  %-5s %-44s %9s %7s %9s %7s %6s' proto load rampart us nginx us ratio)"
for proto in "${protos[@]}"; do
  mr=$(median <<<"${eff[$proto/rampart]}")
  mn=""
  if [ -n "${eff[$proto/nginx]:-}" ]; then mn=$(median <<<"${eff[$proto/nginx]}"); fi # none for h3
  # (awk: parenthesise ternaries after print, or 'print x>0?...' redirects into a file named 0)
  say "$(awk -v pr="$proto" -v ld="$(load_desc "$proto")" -v a="$mr" -v b="$mn" -v why="$nginx_h3_short" 'BEGIN{
    printf "  %-5s %-44s %9.0f %7.1f ", pr, ld, a, (a>0 ? 1e6/a : 0)
    if (b == "") printf "%9s %7s %6s  (%s)", "-", "-", "-", why
    else printf "%9.0f %7.1f %6.2f", b, (b>0 ? 1e6/b : 0), (b>0 ? a/b : 0)}')"
done
say "  ratio = rampart/nginx (> 1: rampart is cheaper per request); differences under ~20% are noise here."

if $has_h3; then # QUIC over loopback loses datagrams only when a socket buffer overflows
  read -r udp_rcv1 udp_snd1 < <(udp_errs)
  say "  UDP datagrams dropped during the rounds (host-wide): receive-buffer $((udp_rcv1 - udp_rcv0)), send-buffer $((udp_snd1 - udp_snd0))"
fi

# rampart logs no access lines here (-access-log off), so anything at WARN/ERROR is worth a look
# (e.g. the UDP buffer warning for HTTP/3).
warns=$(grep -E '"level":"(WARN|ERROR)"|level=(WARN|ERROR)' "$work/rampart.log" || true)
if [ -n "$warns" ]; then
  say ""
  say "rampart log: $(grep -c . <<<"$warns") WARN/ERROR lines (first 10):"
  say "$(head -n 10 <<<"$warns" | cut -c1-300 | sed 's/^/  /')"
fi
{ echo; echo "---- rampart log"; cat "$work/rampart.log"; echo; echo "---- raw load-tool output"; cat "$raw"; } >>"$report"
say "report: $report"
