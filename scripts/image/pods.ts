/**
 * The chart's rendered manifests, turned into what `podman kube play` (4.x) can run on one
 * machine: each Deployment replica, each Job's pod template and each CronJob's pod template
 * becomes a Pod; Secrets become podman secrets. Everything else (Services, Ingress, HPA, PDB,
 * NetworkPolicy, monitoring objects) has no podman equivalent and is listed as skipped.
 * Pure functions: play.ts runs them; pods.test.ts pins each rule.
 */
import type { Manifest } from '../chart/manifests';

export interface PodmanSecret {
  name: string;
  /** Key → base64 value: the JSON map `podman secret create` is given for `secretKeyRef`. */
  data: Record<string, string>;
}

export interface PlayPlan {
  /** Pods of the migration Job and the ECHO CronJob: run to completion. */
  jobs: Manifest[];
  /** Pods of the Deployments' replicas: long-running. */
  pods: Manifest[];
  secrets: PodmanSecret[];
  /** Kind/name of every object podman has nothing for. */
  skipped: string[];
}

export interface PlanOptions {
  /** The rendered chart of each replica index: replica i of a Deployment comes from renders[i]. */
  renders: Manifest[][];
  /** A CA file mounted into the named containers with NODE_EXTRA_CA_CERTS (a local HTTPS receiver). */
  extraCa?: { hostFile: string; containers: string[] };
}

type Container = {
  name: string;
  ports?: { name: string; containerPort: number }[];
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  [probe: string]: unknown;
};

const PROBES = ['startupProbe', 'livenessProbe', 'readinessProbe'] as const;

/** Cluster DNS names of the release's Services (short, namespaced and FQDN), all to loopback. */
export function serviceHostnames(manifests: Manifest[]): string[] {
  const names: string[] = [];
  for (const m of manifests) {
    if (m.kind !== 'Service') continue;
    const { name, namespace = 'default' } = m.metadata;
    names.push(name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`);
  }
  return names;
}

/**
 * One pod spec made playable: host network (every port on 127.0.0.1 of this machine), Service
 * names resolved to loopback, no `ports:` list (podman refuses port mappings on the host
 * network), probe ports by number, no ServiceAccount, an emptyDir of its own.
 */
export function podmanPodSpec(podName: string, spec: Manifest['spec'], hostnames: string[], options: PlanOptions): Manifest['spec'] {
  const out = structuredClone(spec);
  out.hostNetwork = true;
  if (hostnames.length > 0) out.hostAliases = [{ ip: '127.0.0.1', hostnames }];
  delete out.serviceAccountName;
  for (const c of [...(out.initContainers ?? []), ...(out.containers ?? [])] as Container[]) {
    const ports = new Map((c.ports ?? []).map((p) => [p.name, p.containerPort]));
    delete c.ports;
    for (const probe of PROBES) {
      const get = (c[probe] as { httpGet?: { port: number | string } } | undefined)?.httpGet;
      if (get && typeof get.port === 'string') {
        const port = ports.get(get.port);
        if (port === undefined) throw new Error(`${c.name}: ${probe} names port "${get.port}", which the container does not declare`);
        get.port = port;
      }
    }
    if (options.extraCa?.containers.includes(c.name)) {
      c.env = [...(c.env ?? []), { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/fcd/extra-ca/ca.crt' }];
      c.volumeMounts = [...(c.volumeMounts ?? []), { name: 'extra-ca', mountPath: '/etc/fcd/extra-ca', readOnly: true }];
    }
  }
  // podman 4.x plays an emptyDir as a named volume of the volume's name, shared by every pod that
  // names it: each pod gets its own (`<pod>-<volume>`), as each Kubernetes pod has.
  for (const v of out.volumes ?? []) {
    if (!v.emptyDir) continue;
    const own = `${podName}-${v.name}`;
    for (const c of [...(out.initContainers ?? []), ...(out.containers ?? [])] as Container[])
      for (const m of c.volumeMounts ?? []) if (m.name === v.name) m.name = own;
    v.name = own;
  }
  const named = (out.containers as Container[]).some((c) => options.extraCa?.containers.includes(c.name));
  if (options.extraCa && named) {
    const dir = options.extraCa.hostFile.replace(/\/[^/]+$/, '');
    out.volumes = [...(out.volumes ?? []), { name: 'extra-ca', hostPath: { path: dir, type: 'Directory' } }];
  }
  return out;
}

/** Annotations podman 4.x accepts: it holds their values to the 63 characters of a label value. */
function podmanAnnotations(annotations: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(annotations).filter(([, v]) => v.length <= 63));
}

function pod(name: string, template: Manifest['spec'], hostnames: string[], options: PlanOptions): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: template.metadata?.labels ?? {}, annotations: podmanAnnotations(template.metadata?.annotations) },
    spec: podmanPodSpec(name, template.spec, hostnames, options),
  };
}

function secretOf(m: Manifest): PodmanSecret {
  const data: Record<string, string> = { ...(m.data ?? {}) };
  for (const [k, v] of Object.entries((m.stringData ?? {}) as Record<string, string>)) data[k] = Buffer.from(v).toString('base64');
  return { name: m.metadata.name, data };
}

/** The play of a rendered chart (see the module comment). */
export function playPlan(options: PlanOptions): PlayPlan {
  const [first = []] = options.renders;
  const hostnames = serviceHostnames(first);
  const plan: PlayPlan = { jobs: [], pods: [], secrets: [], skipped: [] };
  for (const m of first) {
    const { name } = m.metadata;
    if (m.kind === 'Deployment') {
      const replicas = m.spec.replicas ?? 1;
      for (let i = 0; i < replicas; i++) {
        const rendered = options.renders[i]?.find((r) => r.kind === 'Deployment' && r.metadata.name === name);
        if (!rendered) throw new Error(`Deployment/${name}: replica ${i} needs a render of its own (its own ports)`);
        plan.pods.push(pod(`${name}-${i}`, rendered.spec.template, hostnames, options));
      }
    } else if (m.kind === 'Job') plan.jobs.push(pod(name, m.spec.template, hostnames, options));
    else if (m.kind === 'CronJob') plan.jobs.push(pod(`${name}-once`, m.spec.jobTemplate.spec.template, hostnames, options));
    else if (m.kind === 'Secret') plan.secrets.push(secretOf(m));
    else plan.skipped.push(`${m.kind}/${name}`);
  }
  return plan;
}
