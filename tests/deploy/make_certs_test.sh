#!/usr/bin/env bash
# scripts/make-certs: one identity per component with the names the
# hardening contract expects, verifying against the CA; bad arguments are
# refused before anything is written; a second run re-issues under the same CA.
# Usage: make_certs_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: make_certs_test.sh SOURCE_DIR}
mc=$src/scripts/make-certs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$work/pki

"$mc" "$out" --agent node-1=10.0.0.1 --agent node-2=10.0.0.2,10.0.1.2 --controller-san 10.9.9.9 >/dev/null
subject() { openssl x509 -in "$out/$1/tls.crt" -noout -subject | sed 's/^subject= *//; s/ //g'; }
sans() { openssl x509 -in "$out/$1/tls.crt" -noout -ext subjectAltName | tail -n +2 | tr -d ' '; }
eku() { openssl x509 -in "$out/$1/tls.crt" -noout -ext extendedKeyUsage | tail -n +2 | tr -d ' '; }
for id in crest-controller crest-cli node-1 node-2; do
  [ "$(subject $id)" = "CN=$id" ] || fail "$id: subject $(subject $id)"
  openssl verify -CAfile "$out/ca.crt" "$out/$id/tls.crt" >/dev/null || fail "$id does not verify"
  cmp -s "$out/ca.crt" "$out/$id/ca.crt" || fail "$id/ca.crt is not the CA"
  [ "$(stat -c %a "$out/$id/tls.key")" = 600 ] || fail "$id/tls.key is readable by others"
  # The key belongs to the certificate.
  [ "$(openssl pkey -in "$out/$id/tls.key" -pubout)" = "$(openssl x509 -in "$out/$id/tls.crt" -noout -pubkey)" ] ||
    fail "$id: tls.key does not match tls.crt"
done
[ "$(sans node-1)" = "DNS:node-1,IPAddress:10.0.0.1" ] || fail "node-1 SANs: $(sans node-1)"
[ "$(sans node-2)" = "DNS:node-2,IPAddress:10.0.0.2,IPAddress:10.0.1.2" ] || fail "node-2 SANs: $(sans node-2)"
sans crest-controller | grep -q "DNS:crest-controller.crest.svc," || fail "controller SANs lack the Service name"
sans crest-controller | grep -q "IPAddress:10.9.9.9" || fail "controller SANs lack --controller-san"
[ "$(eku crest-cli)" = "TLSWebClientAuthentication" ] || fail "crest-cli may serve: $(eku crest-cli)"
[ "$(eku node-1)" = "TLSWebServerAuthentication,TLSWebClientAuthentication" ] || fail "node-1 EKU: $(eku node-1)"
echo "ok: identities, names, usages, chain"

# Bad input: a clear message, exit 2, nothing written.
refused() {  # EXPECTED-MESSAGE ARGS...
  local want=$1
  shift
  if "$mc" "$work/bad" "$@" >"$work/err" 2>&1; then fail "accepted: $*"; fi
  grep -qF -- "$want" "$work/err" || fail "for '$*' expected '$want', got: $(cat "$work/err")"
  [ ! -e "$work/bad" ] || fail "'$*' wrote $work/bad"
}
refused "node name 'Node_1' is not a Kubernetes node name" --agent Node_1
refused "'10.0.0.x' is not an IP address" --agent node-1=10.0.0.x
refused "node node-1 given twice" --agent node-1 --agent node-1=10.0.0.1
refused "'crest-controller' is another component's identity" --agent crest-controller
refused "--days 'x': expected a positive whole number" --days x
refused "unknown argument '--agents'" --agents node-1
echo "ok: bad arguments refused before writing"

# Again: the same CA, new leaves (rotation).
old_serial=$(openssl x509 -in "$out/node-1/tls.crt" -noout -serial)
old_ca=$(openssl x509 -in "$out/ca.crt" -noout -fingerprint)
"$mc" "$out" --agent node-1=10.0.0.1 --no-cli --no-controller >"$work/again"
grep -q "reusing the CA" "$work/again" || fail "CA not reused: $(cat "$work/again")"
[ "$(openssl x509 -in "$out/ca.crt" -noout -fingerprint)" = "$old_ca" ] || fail "the CA changed"
[ "$(openssl x509 -in "$out/node-1/tls.crt" -noout -serial)" != "$old_serial" ] || fail "node-1 was not re-issued"
openssl verify -CAfile "$out/ca.crt" "$out/crest-controller/tls.crt" >/dev/null || fail "old controller cert no longer verifies"
echo "PASS: make-certs"
