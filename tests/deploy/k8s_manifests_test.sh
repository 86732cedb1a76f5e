#!/usr/bin/env bash
# Offline checks of deploy/k8s: renders every kustomization with `kubectl
# kustomize` (Debian 12: package kubernetes-client), validates each rendered
# object against the Kubernetes, cert-manager and Prometheus Operator schemas
# (npm kubernetes-models, installed by scripts/install-deps) and checks the
# references between them (check_manifests.js). Then proves the checker sees
# what it must: breakages of the real manifests and the flaws of the first ones.
# Usage: k8s_manifests_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: k8s_manifests_test.sh SOURCE_DIR}
here=$src/tests/deploy
kubectl=${KUBECTL:-kubectl}
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v "$kubectl" >/dev/null || fail "no '$kubectl' on PATH (Debian: kubernetes-client; run scripts/install-deps)"
command -v node >/dev/null || fail "no 'node' on PATH (Debian: nodejs; run scripts/install-deps)"
if [ ! -d "$here/node_modules/kubernetes-models" ]; then
  # The npm packages are not installed, almost always because the npm registry
  # was unreachable when scripts/install-deps ran `npm ci` (it warns then). The
  # rendering is still checked; the schema and reference checks are skipped,
  # saying why, rather than failing a build that has no registry.
  while IFS= read -r k; do
    "$kubectl" kustomize "$(dirname "$k")" >/dev/null || fail "kubectl kustomize $(dirname "$k") failed"
  done < <(find "$src/deploy/k8s" -name kustomization.yaml | sort)
  if command -v npm >/dev/null; then
    why="npm ci has not installed them: scripts/install-deps runs it and it fails where the npm registry ($(npm config get registry 2>/dev/null || echo unknown)) cannot be reached or its TLS certificate is not trusted"
  else
    why="npm is not installed (Debian: npm; run scripts/install-deps)"
  fi
  echo "SKIP (exit 77): the schema and cross-reference checks of deploy/k8s did not run, only" \
    "'kubectl kustomize' rendering was checked. They need the npm packages of" \
    "$here/package-lock.json (kubernetes-models) in $here/node_modules, and $why." \
    "To run them: cd $here && npm ci" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() { node "$here/check_manifests.js" "$@"; }

# Secrets a kustomization expects to exist already (made by scripts/make-certs).
declare -A external=([base]=crest-controller-tls)
n=0
while IFS= read -r k; do
  dir=$(dirname "$k")
  name=$(basename "$dir")
  out=$work/$name.yaml
  "$kubectl" kustomize "$dir" >"$out" 2>"$work/$name.err" ||
    fail "kubectl kustomize $dir: $(cat "$work/$name.err")"
  args=()
  [ -n "${external[$name]:-}" ] && args=(--external-secret "${external[$name]}")
  check "$out" "${args[@]}" || fail "$dir does not pass the checks above"
  n=$((n + 1))
done < <(find "$src/deploy/k8s" -name kustomization.yaml | sort)
[ "$n" -ge 2 ] || fail "expected a base and an overlay under deploy/k8s, found $n kustomizations"

# Each breakage must be reported with its own message.
expect_problem() {  # NAME SED-EXPRESSION EXPECTED-MESSAGE
  sed -e "$2" "$work/example.yaml" >"$work/$1.yaml"
  cmp -s "$work/example.yaml" "$work/$1.yaml" && fail "$1: the edit '$2' changed nothing"
  if check "$work/$1.yaml" >"$work/$1.out"; then fail "$1: the checker passed a broken rendering"; fi
  grep -qF -- "$3" "$work/$1.out" || fail "$1: expected '$3' in: $(cat "$work/$1.out")"
  echo "ok: $1 is reported"
}
expect_problem controller-port 's/--controller=crest-controller.crest.svc:50051/--controller=crest-controller.crest.svc:50052/' \
  'Service crest-controller has no port 50052'
expect_problem controller-name 's/--controller=crest-controller.crest.svc:/--controller=crest-ctl.crest.svc:/' \
  'names no rendered Service'
expect_problem probe-port 's/--address=127.0.0.1:50051/--address=127.0.0.1:50053/' \
  'checks port 50053 but the container listens on 0.0.0.0:50051'
expect_problem secret-name 's/^\(        *\)secretName: crest-controller-tls$/\1secretName: crest-controller-tlz/' \
  "Secret 'crest-controller-tlz' is neither rendered nor issued by a Certificate"
expect_problem schema-type 's/containerPort: 9465/containerPort: "9465"/' \
  'containerPort must be integer'
expect_problem service-target 's/targetPort: metrics/targetPort: metrix/' \
  "port 'metrics' targets metrix"
expect_problem monitor-port 's/^    port: metrics$/    port: metrix/' \
  "endpoint port 'metrix'"
expect_problem configmap-name 's/^\(        *\)name: crest-agent-config$/\1name: crest-agent-konfig/' \
  "ConfigMap 'crest-agent-konfig' is not defined"
# The schemas reject fields they do not define, as the API server's strict
# field validation would, rather than letting a misspelt one be dropped.
expect_problem unknown-container-field \
  '0,/^        image: crest/s/^\(        \)image: .*$/&\n\1imagePullPolcy: IfNotPresent/' \
  "Deployment/crest-controller: unknown field 'spec.template.spec.containers[0].imagePullPolcy'"
expect_problem unknown-spec-field 's/^  replicas: 1$/&\n  progressDeadline: 600/' \
  "Deployment/crest-controller: unknown field 'spec.progressDeadline'"
expect_problem unknown-crd-field 's/^  endpoints:$/  endpoint:/' \
  "ServiceMonitor/crest-controller: unknown field 'spec.endpoint'"
# What the agent and its daemon write stays writable under the read-only root
# filesystem: the daemon's log dir under root's home, and the MindIE install
# that the agent's config names (config.json).
expect_problem daemon-log-dir 's|^\(        - mountPath: \)/root/mindie/log$|\1/root/mindie/logs|' \
  "DaemonSet/crest-agent: container 'agent': /root/mindie/log (MindIE's logs) is on the read-only root filesystem"
expect_problem mindie-install-read-only 's|^\(        - mountPath: /usr/local/Ascend/mindie\)$|\1\n          readOnly: true|' \
  "/usr/local/Ascend/mindie/latest/mindie-service (the MindIE install of --config: config.json) is on volume 'mindie', which is read-only"
if check "$here/testdata/flawed.yaml" >"$work/flawed.out"; then fail "flawed.yaml passed"; fi
for want in 'kubelet gRPC probe, which sends no client certificate' \
  "a DaemonSet must not mount Secret 'crest-tls'" 'each component has its own identity' \
  'matches no workload'; do
  grep -qF -- "$want" "$work/flawed.out" || fail "flawed.yaml: expected '$want' in: $(cat "$work/flawed.out")"
done
echo "ok: the first manifests' flaws are reported"
echo "PASS: $n kustomizations render and pass; every breakage is reported"
