# perf/setup.sh — the set-up perf/tls.sh, perf/cache.sh and perf/idle.sh share; sourced, not run.
#
# The caller sets: name (for messages and the work dir), tools (commands it needs), ports (TCP
# ports that must be free). This file then: checks both, makes the work dir $work (kept with
# KEEP=1) and a trap that stops every pid in $pids, builds $RAMPART unless given, makes a P-256
# certificate tls.crt/tls.key (and haproxy.pem) in $work, and cds there. Helpers: die, wait_ok URL,
# nginx_conf DIR CONFIG-BODY (NGINX_RLIMIT adds worker_rlimit_nofile), ticks PID... (utime+stime).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "$name: $*" >&2; exit 1; }
for t in "${tools[@]}"; do command -v "$t" >/dev/null || die "missing $t (hack/deps.sh perf)"; done
for p in "${ports[@]}"; do if ss -Htln "sport = :$p" | grep -q .; then die "port $p is in use"; fi; done
work=$(mktemp -d "/tmp/rampart-${name%.sh}.XXXXXX")
chmod 755 "$work" # nginx workers run as 'nobody' and need to reach their prefix dirs
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "$name: work dir kept: $work" >&2; fi
}
trap cleanup EXIT
if [ -z "${RAMPART:-}" ]; then
  RAMPART=$work/rampart
  (cd "$root" && go build -o "$RAMPART" ./cmd/rampart) || die "go build ./cmd/rampart failed"
fi
cd "$work"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout tls.key -out tls.crt 2>/dev/null
chmod 644 tls.key
cat tls.crt tls.key >haproxy.pem
wait_ok() { # wait_ok URL: until it answers 200, for up to 10 s
  for _ in $(seq 100); do [ "$(curl -sk -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0; sleep 0.1; done
  die "$1 did not answer 200 within 10 s"
}
nginx_conf() { # nginx_conf DIR BODY: $work/DIR/nginx.conf, in the foreground, logs in DIR
  mkdir -p "$work/$1"
  {
    printf 'daemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\n' "$work/$1" "$work/$1"
    [ -z "${NGINX_RLIMIT:-}" ] || printf 'worker_rlimit_nofile %s;\n' "$NGINX_RLIMIT"
    printf '%s\n' "$2"
  } >"$work/$1/nginx.conf"
}
ticks() { # ticks PID...: their utime+stime; a process that is gone counts 0 (nginx's cache loader exits)
  local s=0 f a
  for p in "$@"; do
    f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    f=${f##*) }
    read -ra a <<<"$f"
    s=$((s + a[11] + a[12]))
  done
  echo $s
}
