// Offline checks of one rendered kustomization (`kubectl kustomize DIR`):
// every object against the Kubernetes schemas of the kubernetes-models
// packages (cert-manager and Prometheus Operator kinds included), rejecting
// fields a schema does not define as the API server's strict field validation
// does; then the references between objects that no schema sees: selectors
// and labels, Service and probe ports, Secret/ConfigMap/PVC/ServiceAccount
// names, the controller address the agents dial, one TLS identity per
// component, and a writable volume for every path the agent and its daemon
// write under a read-only root filesystem.
//
// Usage: node check_manifests.js RENDERED.yaml [--external-secret NAME]...
// Prints one line per problem ("<kind>/<name>: what, expected what") and
// exits 1 when there is any; prints a summary and exits 0 otherwise.
'use strict';

const fs = require('fs');
const YAML = require('yaml');

const schemaModules = {
  '': 'kubernetes-models',
  'cert-manager.io': '@kubernetes-models/cert-manager',
  'monitoring.coreos.com': '@kubernetes-models/prometheus-operator',
};

function modelFor(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const pkg = schemaModules[group] || schemaModules[''];
  try {
    return require(`${pkg}/${apiVersion}/${kind}`)[kind];
  } catch (e) {
    return null;
  }
}

const args = process.argv.slice(2);
const file = args[0];
const external = new Set();
for (let i = 1; i < args.length; i += 2) {
  if (args[i] !== '--external-secret' || !args[i + 1]) {
    console.error(`check_manifests: unknown argument '${args[i]}' (expected --external-secret NAME)`);
    process.exit(2);
  }
  external.add(args[i + 1]);
}

const problems = [];
const objects = [];
for (const doc of YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'))) {
  if (doc.errors.length) {
    problems.push(`${file}: YAML: ${doc.errors[0].message}`);
    continue;
  }
  const o = doc.toJS();
  if (o) objects.push(o);
}
const id = (o) => `${o.kind}/${(o.metadata || {}).name}`;
const problem = (o, what) => problems.push(`${id(o)}: ${what}`);

// --- schemas ---------------------------------------------------------------
// The kubernetes-models validators accept fields their schemas do not define
// (no additionalProperties: false, no strict mode), so a misspelt field such
// as `imagePullPolcy` would pass and the API server would drop it. Their
// generated code reads every property a schema defines, so each object is
// validated through a Proxy that records the keys read: a key never read is
// unknown to the schema. A map type (labels) enumerates its keys, and a
// free-form object (preserve-unknown-fields) is never looked into; both are
// exempt.
function tracked(value, path, read) {
  if (value === null || typeof value !== 'object') return value;
  const entry = {path, value, keys: new Set(), listed: false};
  read.push(entry);
  const children = new Map();
  const childPath = (k) => (Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${k}` : k);
  return new Proxy(value, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof key !== 'string' || !Object.prototype.hasOwnProperty.call(target, key)) {
        if (typeof key === 'string') entry.keys.add(key);
        return v;
      }
      entry.keys.add(key);
      if (!children.has(key)) children.set(key, tracked(v, childPath(key), read));
      return children.get(key);
    },
    has(target, key) {
      if (typeof key === 'string') entry.keys.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      entry.listed = true;
      return Reflect.ownKeys(target);
    },
  });
}
function unknownFields(read) {
  const unknown = [];
  for (const e of read) {
    if (Array.isArray(e.value) || e.listed || e.keys.size === 0) continue;
    for (const k of Object.keys(e.value)) {
      if (!e.keys.has(k)) unknown.push(e.path ? `${e.path}.${k}` : k);
    }
  }
  return unknown;
}

for (const o of objects) {
  const Model = o.apiVersion && o.kind ? modelFor(o.apiVersion, o.kind) : null;
  if (!Model) {
    problem(o, `no schema for apiVersion '${o.apiVersion}' kind '${o.kind}'`);
    continue;
  }
  const read = [];
  try {
    Model.prototype.validate.call(tracked(new Model(o), '', read));
  } catch (e) {
    problem(o, `schema: ${e.message}`);
  }
  for (const field of unknownFields(read)) {
    problem(o, `unknown field '${field}' (the ${o.apiVersion} ${o.kind} schema has no such field)`);
  }
}

// The reference checks below assume schema-valid objects; on one that is not
// they may throw, so print the problems found so far rather than a stack trace.
process.on('uncaughtException', (e) => {
  for (const p of problems) console.log(p);
  console.log(`${file}: cross-reference checks stopped (${e.message}) after ${problems.length} problem(s)`);
  process.exit(1);
});

// --- indexes -----------------------------------------------------------------
const byKind = (kind) => objects.filter((o) => o.kind === kind);
const names = (kind) => new Set(byKind(kind).map((o) => o.metadata.name));
const namespaces = names('Namespace');
const workloads = objects.filter((o) => ['Deployment', 'DaemonSet', 'StatefulSet'].includes(o.kind));
const podSpec = (w) => w.spec.template.spec;
const containersOf = (w) => [...(podSpec(w).initContainers || []), ...podSpec(w).containers];
const matches = (selector, labels) =>
  Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);
const secretsDefined = new Set([
  ...names('Secret'),
  ...byKind('Certificate').map((c) => c.spec.secretName),
]);
const configMaps = names('ConfigMap');

for (const o of objects) {
  const ns = o.metadata.namespace;
  if (o.kind !== 'Namespace' && ns && !namespaces.has(ns)) {
    problem(o, `namespace '${ns}' is not among the rendered Namespaces`);
  }
}

// The --flag=value of a container's args.
function flag(container, name) {
  for (const a of container.args || []) {
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
}
const portOf = (address) => Number(String(address).split(':').pop());
const containerPorts = (c) => (c.ports || []).map((p) => ({name: p.name, port: p.containerPort}));
function resolvePort(c, port) {
  const found = containerPorts(c).find((p) => p.name === port || p.port === port);
  return found ? found.port : undefined;
}

// The mount a path is under (the deepest one), if any.
function mountOf(c, path) {
  const under = (c.volumeMounts || []).filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
  return under.sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
}
const writableVolume = (v) => v && !v.configMap && !v.secret && !v.downwardAPI && !v.projected;
// What a crest-agent container and the daemon it starts write: the state dir,
// the host's sysfs, /tmp, the MindIE install of its config (config.json), and
// the daemon's log dirs under root's home (it runs as root, the agent's child:
// ~/mindie/log for MindIE, ~/ascend/log for the CANN runtime's plog).
function agentWrites(w, c, volumes) {
  const writes = [[flag(c, 'state-dir'), 'the agent state dir'], [flag(c, 'sysfs-root'), 'the host sysfs'],
    ['/tmp', 'temporary files'], ['/root/mindie/log', "MindIE's logs"], ['/root/ascend/log', "the CANN runtime's logs"]];
  const config = flag(c, 'config');
  const m = config && mountOf(c, config);
  const v = m && volumes.get(m.name);
  const cm = v && v.configMap && byKind('ConfigMap').find((x) => x.metadata.name === v.configMap.name &&
    x.metadata.namespace === w.metadata.namespace);
  const text = cm && (cm.data || {})[m.subPath || config.slice(m.mountPath.length + 1)];
  const daemon = text ? (YAML.parse(text) || {}).daemon : undefined;
  if (daemon && daemon.install_dir) writes.push([daemon.install_dir, 'the MindIE install of --config: config.json']);
  return writes.filter(([path]) => path);
}

// --- workloads ---------------------------------------------------------------
const secretMounts = new Map();  // secret name -> workloads mounting it
for (const w of workloads) {
  const spec = podSpec(w);
  const labels = w.spec.template.metadata.labels;
  if (!matches(w.spec.selector.matchLabels, labels)) {
    problem(w, `selector ${JSON.stringify(w.spec.selector.matchLabels)} does not match the pod labels ${JSON.stringify(labels)}`);
  }
  if (spec.serviceAccountName && !names('ServiceAccount').has(spec.serviceAccountName)) {
    problem(w, `serviceAccountName '${spec.serviceAccountName}' is not defined`);
  }
  const volumes = new Map((spec.volumes || []).map((v) => [v.name, v]));
  for (const v of volumes.values()) {
    if (v.secret) {
      const s = v.secret.secretName;
      if (!secretsDefined.has(s) && !external.has(s)) {
        problem(w, `volume '${v.name}': Secret '${s}' is neither rendered nor issued by a Certificate`);
      }
      if (!secretMounts.has(s)) secretMounts.set(s, new Set());
      secretMounts.get(s).add(id(w));
      // One Secret for every pod of a DaemonSet would give every node the same key.
      if (w.kind === 'DaemonSet') problem(w, `volume '${v.name}': a DaemonSet must not mount Secret '${s}' (every node would hold the same key)`);
    }
    if (v.configMap && !configMaps.has(v.configMap.name)) {
      problem(w, `volume '${v.name}': ConfigMap '${v.configMap.name}' is not defined`);
    }
    if (v.persistentVolumeClaim && !names('PersistentVolumeClaim').has(v.persistentVolumeClaim.claimName)) {
      problem(w, `volume '${v.name}': PersistentVolumeClaim '${v.persistentVolumeClaim.claimName}' is not defined`);
    }
  }
  const annotations = w.spec.template.metadata.annotations || {};
  for (const c of containersOf(w)) {
    const where = `container '${c.name}'`;
    const env = new Set((c.env || []).map((e) => e.name));
    for (const a of [...(c.command || []), ...(c.args || [])]) {
      for (const m of a.matchAll(/\$\(([A-Z_][A-Z0-9_]*)\)/g)) {
        if (!env.has(m[1])) problem(w, `${where}: '${a}' uses $(${m[1]}), which its env does not define`);
      }
    }
    for (const m of c.volumeMounts || []) {
      if (!volumes.has(m.name)) problem(w, `${where}: mounts volume '${m.name}', which the pod does not define`);
    }
    const mounted = (path) => (c.volumeMounts || []).some((m) => path === m.mountPath || path.startsWith(`${m.mountPath}/`));
    // Every file a --tls-* flag names, in args or in a probe, is on a volume.
    const probes = ['readinessProbe', 'livenessProbe', 'startupProbe'].filter((p) => c[p]);
    const probeWords = probes.flatMap((p) => (c[p].exec ? c[p].exec.command.join(' ').split(/\s+/) : []));
    for (const a of [...(c.args || []), ...probeWords]) {
      const m = a.match(/^--tls-(cert|key|ca)=(.+)$/);
      if (m && !mounted(m[2])) problem(w, `${where}: ${a} is on no mounted volume`);
    }
    if (/crest-agent$/.test((c.command || [])[0] || '') && (c.securityContext || {}).readOnlyRootFilesystem) {
      for (const [path, what] of agentWrites(w, c, volumes)) {
        const m = mountOf(c, path);
        if (!m) {
          problem(w, `${where}: ${path} (${what}) is on the read-only root filesystem; mount a writable volume there`);
        } else if (m.readOnly || !writableVolume(volumes.get(m.name))) {
          problem(w, `${where}: ${path} (${what}) is on volume '${m.name}', which is read-only`);
        }
      }
    }
    const listen = flag(c, 'listen');
    const tls = (c.args || []).some((a) => a.startsWith('--tls-cert='));
    for (const p of probes) {
      const probe = c[p];
      if (probe.grpc && tls) {
        problem(w, `${where}: ${p} is a kubelet gRPC probe, which sends no client certificate to a mutual-TLS port`);
      }
      const port = probe.grpc ? probe.grpc.port : (probe.httpGet || probe.tcpSocket || {}).port;
      if (port !== undefined && resolvePort(c, port) === undefined) {
        problem(w, `${where}: ${p} port ${port} is not a container port`);
      }
      if (probe.exec) {
        const cmd = probe.exec.command.join(' ');
        const addr = cmd.match(/--address=("?)([^\s"]+)\1/);
        if (/crest health/.test(cmd) || /crest", "health/.test(cmd)) {
          if (!addr) problem(w, `${where}: ${p} runs crest health without --address`);
        }
        if (addr && listen && portOf(addr[2]) !== portOf(listen)) {
          problem(w, `${where}: ${p} checks port ${portOf(addr[2])} but the container listens on ${listen}`);
        }
        if (addr && resolvePort(c, portOf(addr[2])) === undefined && c.ports) {
          problem(w, `${where}: ${p} checks port ${portOf(addr[2])}, which is not a container port`);
        }
      }
    }
    if (listen && c.ports && resolvePort(c, portOf(listen)) === undefined) {
      problem(w, `${where}: --listen=${listen} is not a declared container port`);
    }
    const metricsListen = flag(c, 'metrics-listen');
    if (metricsListen && annotations['prometheus.io/port'] !== undefined &&
        Number(annotations['prometheus.io/port']) !== portOf(metricsListen)) {
      problem(w, `${where}: prometheus.io/port ${annotations['prometheus.io/port']} but --metrics-listen=${metricsListen}`);
    }
    // The agents register with the controller's Service, whose certificate names it.
    const controller = flag(c, 'controller');
    if (controller) {
      const [host, port] = [controller.slice(0, controller.lastIndexOf(':')), portOf(controller)];
      const [svcName, svcNs, svc] = host.split('.');
      const service = byKind('Service').find((s) => s.metadata.name === svcName && s.metadata.namespace === svcNs);
      if (svc !== 'svc' || !service) {
        problem(w, `${where}: --controller=${controller} names no rendered Service (expected SERVICE.NAMESPACE.svc:PORT)`);
      } else {
        const sp = service.spec.ports.find((p) => p.port === port);
        if (!sp) problem(w, `${where}: --controller=${controller}: Service ${svcName} has no port ${port}`);
        const backends = workloads.filter((x) => matches(service.spec.selector, x.spec.template.metadata.labels));
        const serves = backends.some((b) => containersOf(b).some((bc) =>
          sp && resolvePort(bc, sp.targetPort) !== undefined &&
          flag(bc, 'listen') && portOf(flag(bc, 'listen')) === resolvePort(bc, sp.targetPort)));
        if (sp && !serves) problem(w, `${where}: --controller=${controller}: no pod behind Service ${svcName} serves gRPC on its target port`);
        for (const cert of byKind('Certificate').filter((x) => x.spec.commonName === 'crest-controller')) {
          if (!(cert.spec.dnsNames || []).includes(host)) {
            problem(cert, `dnsNames lack '${host}', the address the agents dial`);
          }
        }
      }
    }
  }
}
for (const [secret, users] of secretMounts) {
  if (users.size > 1) problems.push(`Secret/${secret}: mounted by ${[...users].join(', ')}; each component has its own identity`);
}
for (const name of ['crest-cli-tls', 'crest-ca']) {
  if (secretMounts.has(name)) problems.push(`Secret/${name}: mounted by ${[...secretMounts.get(name)].join(', ')}; no pod may hold it`);
}

// --- services and monitors -----------------------------------------------------
for (const s of byKind('Service')) {
  const backends = workloads.filter((w) => matches(s.spec.selector, w.spec.template.metadata.labels));
  if (!backends.length) {
    problem(s, `selector ${JSON.stringify(s.spec.selector)} matches no workload's pods`);
    continue;
  }
  for (const p of s.spec.ports) {
    const target = p.targetPort === undefined ? p.port : p.targetPort;
    if (!backends.some((b) => b.spec.template.spec.containers.some((c) => resolvePort(c, target) !== undefined))) {
      problem(s, `port '${p.name}' targets ${target}, which no container of ${backends.map(id).join(', ')} declares`);
    }
  }
}
for (const m of byKind('ServiceMonitor')) {
  const services = byKind('Service').filter((s) => matches(m.spec.selector.matchLabels, s.metadata.labels));
  if (!services.length) problem(m, `selector ${JSON.stringify(m.spec.selector.matchLabels)} matches no Service's labels`);
  for (const e of m.spec.endpoints || []) {
    if (!services.some((s) => s.spec.ports.some((p) => p.name === e.port))) {
      problem(m, `endpoint port '${e.port}' is not a named port of the selected Services`);
    }
  }
}
for (const m of byKind('PodMonitor')) {
  const pods = workloads.filter((w) => matches(m.spec.selector.matchLabels, w.spec.template.metadata.labels));
  if (!pods.length) problem(m, `selector ${JSON.stringify(m.spec.selector.matchLabels)} matches no workload's pods`);
  for (const e of m.spec.podMetricsEndpoints || []) {
    if (!pods.some((w) => w.spec.template.spec.containers.some((c) => containerPorts(c).some((p) => p.name === e.port)))) {
      problem(m, `endpoint port '${e.port}' is not a named container port of the selected pods`);
    }
  }
}

// --- certificates and RBAC -------------------------------------------------------
const issuers = names('Issuer');
for (const c of byKind('Certificate')) {
  if (c.spec.issuerRef.kind === 'Issuer' && !issuers.has(c.spec.issuerRef.name)) {
    problem(c, `issuerRef '${c.spec.issuerRef.name}' is not a rendered Issuer`);
  }
}
for (const i of byKind('Issuer')) {
  if (i.spec.ca && !secretsDefined.has(i.spec.ca.secretName)) {
    problem(i, `CA Secret '${i.spec.ca.secretName}' is issued by no Certificate`);
  }
}
for (const b of byKind('RoleBinding')) {
  if (b.roleRef.kind === 'Role' && !names('Role').has(b.roleRef.name)) {
    problem(b, `roleRef Role '${b.roleRef.name}' is not defined`);
  }
  for (const s of b.subjects || []) {
    if (s.kind === 'ServiceAccount' && !names('ServiceAccount').has(s.name)) {
      problem(b, `subject ServiceAccount '${s.name}' is not defined`);
    }
  }
}

for (const p of problems) console.log(p);
if (problems.length) {
  console.log(`${file}: ${problems.length} problem(s) in ${objects.length} objects`);
  process.exit(1);
}
console.log(`${file}: ${objects.length} objects valid (schemas and cross-references)`);
