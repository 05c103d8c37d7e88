#!/usr/bin/env bash
# System packages the tests and the demo use, from Debian's archive:
#   chromium  - the dashboard's browser test (Playwright drives /usr/bin/chromium)
#   kcat      - an independent Kafka client used by the collector's exactly-once test
#   redis-server - the worker's shared prediction cache tests start one on loopback
#   prometheus - promtool checks and unit-tests deploy/prometheus rules; a test scrapes the scheduler with it
#   prometheus-alertmanager - the Alertmanager channel's test posts to a real one on loopback
#   default-jre-headless - the Java runtime PySpark needs: `detect --engine spark` and its tests (Spark local mode)
# Installed only when missing; needs root (as on the development machines and CI).
set -u
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "note: ${missing[*]} not installed and not root; install them with apt-get for the browser, kcat, Redis, Prometheus, Alertmanager and Spark tests" >&2
  exit 0
fi
echo "installing system packages: ${missing[*]} ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
  || { echo "error: apt-get could not install ${missing[*]}" >&2; exit 1; }
