#!/usr/bin/env bash
# What the tests run for real beyond npm (Debian packages): Chromium (browser tests), nginx with njs
# (the nginx recipe), PgBouncer (the web tier through a transaction-mode pooler), PostgreSQL 15's
# server and client programs (a streaming standby made with pg_basebackup; backups) and Python 3
# with requests (docs/api.md's Python example, run as written). `npm test` runs this first
# (pretest), and .ci/run before npm ci.
#
# Everything present: exit 0 at once (file checks only; no apt-get). Something missing: as root
# with apt-get, install it; otherwise exit 1 with the one line that says what to install.
# PREREQUISITES_ROOT (default: none) is put before every checked path, so a test can point the
# checks at a directory of its own.
set -uo pipefail
root="${PREREQUISITES_ROOT:-}"

missing() {
  wanted=()
  [ -x "$root/usr/bin/chromium" ] || wanted+=(chromium)
  [ -x "$root/usr/sbin/nginx" ] || wanted+=(nginx-light)
  [ -f "$root/usr/lib/nginx/modules/ngx_http_js_module.so" ] || wanted+=(libnginx-mod-http-js)
  [ -x "$root/usr/sbin/pgbouncer" ] || wanted+=(pgbouncer)
  { [ -x "$root/usr/lib/postgresql/15/bin/initdb" ] && [ -x "$root/usr/lib/postgresql/15/bin/pg_basebackup" ]; } ||
    wanted+=(postgresql-15)
  "${root:+$root/usr/bin/}python3" -c 'import requests' >/dev/null 2>&1 || wanted+=(python3-requests)
}

missing
[ ${#wanted[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${wanted[*]} for the tests (apt-get)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}" >/dev/null) ||
    { echo "the tests need Debian packages that apt-get could not install: ${wanted[*]}" >&2; exit 1; }
  missing
  [ ${#wanted[@]} -eq 0 ] && exit 0
  echo "the tests need Debian packages still missing after apt-get install: ${wanted[*]}" >&2
  exit 1
fi

echo "the tests need Debian packages: as root, apt-get install -y ${wanted[*]}" >&2
exit 1
