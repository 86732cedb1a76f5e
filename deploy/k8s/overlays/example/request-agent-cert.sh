#!/bin/sh
# Init step of the agent pod (overlays/example): a certificate for this node,
# issued by cert-manager. Makes an ECDSA key in $CREST_CERT_DIR (a memory
# volume), sends a CertificateRequest with CN and DNS SAN = $NODE_NAME and IP
# SAN = $POD_IP (the node's address: hostNetwork), owned by this pod so it is
# deleted with it, waits for the certificate and writes tls.crt and ca.crt.
# The agent reads them once at start: a restart of the pod renews them.
set -eu
dir=${CREST_CERT_DIR:?}
issuer=${CREST_CERT_ISSUER:?}
: "${NODE_NAME:?}" "${POD_IP:?}" "${POD_NAME:?}" "${POD_UID:?}"
sa=/var/run/secrets/kubernetes.io/serviceaccount
ns=$(cat "$sa/namespace")
api="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/apis/cert-manager.io/v1/namespaces/$ns/certificaterequests"
name="crest-agent-$NODE_NAME-$(echo "$POD_UID" | cut -c1-8)"
call() {
  curl -sS --fail-with-body --max-time 10 --cacert "$sa/ca.crt" \
    -H "Authorization: Bearer $(cat "$sa/token")" -H 'Content-Type: application/json' "$@"
}

umask 077
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$dir/tls.key" -subj "/CN=$NODE_NAME" \
  -addext "subjectAltName=DNS:$NODE_NAME,IP:$POD_IP" -out /tmp/agent.csr 2>/dev/null
csr=$(base64 -w0 /tmp/agent.csr)
call -X POST "$api" -o /dev/null -d "{
  \"apiVersion\": \"cert-manager.io/v1\", \"kind\": \"CertificateRequest\",
  \"metadata\": {\"name\": \"$name\", \"labels\": {\"app.kubernetes.io/name\": \"crest-agent\"},
    \"ownerReferences\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"name\": \"$POD_NAME\", \"uid\": \"$POD_UID\"}]},
  \"spec\": {\"request\": \"$csr\", \"duration\": \"2160h\",
    \"usages\": [\"digital signature\", \"key encipherment\", \"server auth\", \"client auth\"],
    \"issuerRef\": {\"name\": \"$issuer\", \"kind\": \"Issuer\", \"group\": \"cert-manager.io\"}}}"
echo "certificate request $name sent for node $NODE_NAME ($POD_IP)"

# status.certificate and status.ca are single base64 strings without spaces.
field() { tr -d '\n ' </tmp/cr.json | sed -n "s/.*\"$1\":\"\([A-Za-z0-9+\/=]*\)\".*/\1/p"; }
tries=0
while :; do
  call "$api/$name" -o /tmp/cr.json
  cert=$(field certificate)
  if [ -n "$cert" ]; then
    echo "$cert" | base64 -d >"$dir/tls.crt"
    field ca | base64 -d >"$dir/ca.crt"
    [ -s "$dir/ca.crt" ] || { echo "issuer $issuer returned no CA certificate" >&2; exit 1; }
    echo "certificate for $NODE_NAME written to $dir"
    exit 0
  fi
  if tr -d '\n ' </tmp/cr.json | grep -q '"reason":"\(Denied\|Failed\)"'; then
    echo "certificate request $name was refused:" >&2
    cat /tmp/cr.json >&2
    exit 1
  fi
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || { echo "no certificate for $name after 120 s" >&2; exit 1; }
  sleep 2
done
