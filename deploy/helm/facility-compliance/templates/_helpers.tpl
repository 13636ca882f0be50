{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "fcd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fcd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of one component's resources: (dict "ctx" $ "name" "gateway") */}}
{{- define "fcd.componentName" -}}
{{- printf "%s-%s" (include "fcd.fullname" .ctx | trunc 50 | trimSuffix "-") .name -}}
{{- end -}}

{{- define "fcd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The services of this chart, in start-up order. */}}
{{- define "fcd.serviceNames" -}}
{{- list "gateway" "usage" "facility" "webhook" "dispatcher" | toJson -}}
{{- end -}}

{{/* Labels -------------------------------------------------------------------------------- */}}

{{/* Selector labels: (dict "ctx" $ "name" "gateway") */}}
{{- define "fcd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fcd.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* All labels: (dict "ctx" $ "name" "gateway"); name may be empty for chart-wide resources. */}}
{{- define "fcd.labels" -}}
helm.sh/chart: {{ include "fcd.chart" .ctx }}
app.kubernetes.io/name: {{ include "fcd.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .name }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: facility-compliance
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- with .ctx.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "fcd.annotations" -}}
{{- with .Values.global.commonAnnotations }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{/* Values of one service: serviceDefaults deep-merged under the service's own map.
     (dict "ctx" $ "name" "gateway") → YAML; use with fromYaml. */}}
{{- define "fcd.serviceValues" -}}
{{- $own := get .ctx.Values .name | default dict -}}
{{- include "fcd.deepMerge" (list .ctx.Values.serviceDefaults $own) -}}
{{- end -}}

{{/* Deep merge of two maps, the second winning, `false`/0/"" included (sprig's merge and
     mergeOverwrite ignore those): (list $base $override) → JSON. */}}
{{- define "fcd.deepMerge" -}}
{{- $out := deepCopy (index . 0) -}}
{{- range $k, $val := index . 1 -}}
{{- if and (kindIs "map" $val) (kindIs "map" (get $out $k)) -}}
{{- $_ := set $out $k (include "fcd.deepMerge" (list (get $out $k) $val) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $k $val -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Image reference: (dict "ctx" $ "image" $serviceImageOverrides) */}}
{{- define "fcd.image" -}}
{{- $img := merge (deepCopy (.image | default dict)) (deepCopy .ctx.Values.global.image) -}}
{{- $repo := $img.repository -}}
{{- if $img.registry }}{{ $repo = printf "%s/%s" $img.registry $img.repository }}{{ end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo ($img.tag | default .ctx.Chart.AppVersion | toString) -}}
{{- end -}}
{{- end -}}

{{- define "fcd.imagePullPolicy" -}}
{{- (merge (deepCopy (.image | default dict)) (deepCopy .ctx.Values.global.image)).pullPolicy -}}
{{- end -}}

{{/* (dict "ctx" $ "name" "gateway" "sa" $v.serviceAccount) */}}
{{- define "fcd.serviceAccountName" -}}
{{- if .sa.create -}}
{{- default (include "fcd.componentName" .) .sa.name -}}
{{- else -}}
{{- default "default" .sa.name -}}
{{- end -}}
{{- end -}}

{{/* Secrets ------------------------------------------------------------------------------- */}}

{{/* The chart-managed Secret (URLs given by value, generated secrets). */}}
{{- define "fcd.chartSecretName" -}}
{{- include "fcd.fullname" . -}}
{{- end -}}

{{/* A connection URL: (dict "ctx" $ "cfg" .Values.externalDatabase "key" "database-url" "what" "externalDatabase")
     → "name/key" of the Secret that holds it. */}}
{{- define "fcd.urlRef" -}}
{{- if .cfg.url -}}
{{- printf "%s/%s" (include "fcd.chartSecretName" .ctx) .key -}}
{{- else if .cfg.existingSecret -}}
{{- printf "%s/%s" .cfg.existingSecret .cfg.existingSecretKey -}}
{{- else -}}
{{- fail (printf "%s: set %s.url or %s.existingSecret" .what .what .what) -}}
{{- end -}}
{{- end -}}

{{/* An application secret: (dict "ctx" $ "cfg" .Values.secrets.internalAuth "key" "internal-auth-secret"
     "what" "secrets.internalAuth" "optional" false) → "name/key", or "" when optional and absent. */}}
{{- define "fcd.secretRef" -}}
{{- if .cfg.existingSecret -}}
{{- printf "%s/%s" .cfg.existingSecret .cfg.existingSecretKey -}}
{{- else if .ctx.Values.secrets.generate -}}
{{- printf "%s/%s" (include "fcd.chartSecretName" .ctx) .key -}}
{{- else if not .optional -}}
{{- fail (printf "%s: set %s.existingSecret (or secrets.generate=true to let the chart generate it)" .what .what) -}}
{{- end -}}
{{- end -}}

{{/* One env var from "name/key": (dict "env" "DATABASE_URL" "ref" "secret/key") */}}
{{- define "fcd.secretEnv" -}}
{{- $parts := splitList "/" .ref -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ first $parts }}
      key: {{ last $parts }}
{{- end -}}

{{- define "fcd.env.database" -}}
{{ include "fcd.secretEnv" (dict "env" "DATABASE_URL" "ref" (include "fcd.urlRef" (dict "ctx" . "cfg" .Values.externalDatabase "key" "database-url" "what" "externalDatabase"))) }}
{{- with .Values.externalDatabase.pool }}
- name: PG_CONNECT_TIMEOUT_MS
  value: {{ .connectTimeoutMs | quote }}
- name: PG_QUERY_TIMEOUT_MS
  value: {{ .queryTimeoutMs | quote }}
- name: PG_IDLE_TIMEOUT_MS
  value: {{ .idleTimeoutMs | quote }}
- name: PG_MAX_LIFETIME_S
  value: {{ .maxLifetimeSeconds | quote }}
{{- end }}
{{- with .Values.externalDatabase }}
{{- if .password.existingSecret }}
{{ include "fcd.secretEnv" (dict "env" "DATABASE_PASSWORD" "ref" (printf "%s/%s" .password.existingSecret .password.existingSecretKey)) }}
{{- end }}
{{- if .poolMode }}
- name: DATABASE_POOL_MODE
  value: {{ .poolMode | quote }}
{{- end }}
{{- if .sslMode }}
- name: DATABASE_SSLMODE
  value: {{ .sslMode | quote }}
{{- end }}
{{- if .tlsCaSecret.name }}
- name: DATABASE_SSL_CA_FILE
  value: {{ printf "/etc/fcd/backends/postgres/%s" .tlsCaSecret.key | quote }}
{{- end }}
{{- end }}
{{- end -}}
{{- define "fcd.env.redis" -}}
{{- if .Values.externalRedis.clusterNodes }}
- name: REDIS_CLUSTER_NODES
  value: {{ join "," .Values.externalRedis.clusterNodes | quote }}
- name: REDIS_WAIT_REPLICAS
  value: {{ .Values.externalRedis.waitReplicas | quote }}
{{- else }}
{{ include "fcd.secretEnv" (dict "env" "REDIS_URL" "ref" (include "fcd.urlRef" (dict "ctx" . "cfg" .Values.externalRedis "key" "redis-url" "what" "externalRedis"))) }}
{{- end }}
{{- with .Values.externalRedis }}
{{- if .username }}
- name: REDIS_USERNAME
  value: {{ .username | quote }}
{{- end }}
{{- if .password.existingSecret }}
{{ include "fcd.secretEnv" (dict "env" "REDIS_PASSWORD" "ref" (printf "%s/%s" .password.existingSecret .password.existingSecretKey)) }}
{{- end }}
{{- if .tlsCaSecret.name }}
- name: REDIS_TLS_CA_FILE
  value: {{ printf "/etc/fcd/backends/redis/%s" .tlsCaSecret.key | quote }}
{{- end }}
{{- end }}
{{- end -}}
{{- define "fcd.env.nats" -}}
{{ include "fcd.secretEnv" (dict "env" "NATS_URL" "ref" (include "fcd.urlRef" (dict "ctx" . "cfg" .Values.externalNats "key" "nats-url" "what" "externalNats"))) }}
- name: EVENTS_STREAM
  value: {{ .Values.externalNats.eventsStream | quote }}
- name: EVENTS_SUBJECT_PREFIX
  value: {{ .Values.externalNats.eventsSubjectPrefix | quote }}
- name: NATS_STREAM_REPLICAS
  value: {{ .Values.externalNats.streamReplicas | quote }}
{{- end -}}

{{/* NATS credentials and TLS of one service: (dict "ctx" $ "name" "facility") */}}
{{- define "fcd.env.natsAuth" -}}
{{- $n := .ctx.Values.externalNats -}}
{{- $u := get $n .name -}}
{{- if $u.user }}
- name: NATS_USER
  value: {{ $u.user | quote }}
{{- end }}
{{- if $u.password.existingSecret }}
{{ include "fcd.secretEnv" (dict "env" "NATS_PASSWORD" "ref" (printf "%s/%s" $u.password.existingSecret $u.password.existingSecretKey)) }}
{{- end }}
{{- if $u.credsSecret.name }}
- name: NATS_CREDS_FILE
  value: {{ printf "/etc/fcd/backends/nats-creds/%s" $u.credsSecret.key | quote }}
{{- end }}
{{- if $n.tlsCaSecret.name }}
- name: NATS_TLS_CA_FILE
  value: {{ printf "/etc/fcd/backends/nats/%s" $n.tlsCaSecret.key | quote }}
{{- end }}
{{- end -}}

{{/* The backends' mounted files (CA certificates, NATS creds) a service reads: a list of
     (dict "volume" "mountPath" "secret" "key"); used for both volumes and volumeMounts. */}}
{{- define "fcd.backendFiles" -}}
{{- $ctx := .ctx -}}
{{- $files := list -}}
{{- $pg := $ctx.Values.externalDatabase.tlsCaSecret -}}
{{- if and (has .name (list "usage" "facility" "webhook" "dispatcher" "migrate" "echo-sync" "billing-close")) $pg.name -}}
{{- $files = append $files (dict "volume" "postgres-ca" "mountPath" "/etc/fcd/backends/postgres" "secret" $pg.name "key" $pg.key) -}}
{{- end -}}
{{- $rd := $ctx.Values.externalRedis.tlsCaSecret -}}
{{- if and (has .name (list "usage" "gateway" "billing-close")) $rd.name -}}
{{- $files = append $files (dict "volume" "redis-ca" "mountPath" "/etc/fcd/backends/redis" "secret" $rd.name "key" $rd.key) -}}
{{- end -}}
{{- if has .name (list "facility" "dispatcher") -}}
{{- $nc := $ctx.Values.externalNats.tlsCaSecret -}}
{{- if $nc.name -}}
{{- $files = append $files (dict "volume" "nats-ca" "mountPath" "/etc/fcd/backends/nats" "secret" $nc.name "key" $nc.key) -}}
{{- end -}}
{{- $creds := (get $ctx.Values.externalNats .name).credsSecret -}}
{{- if $creds.name -}}
{{- $files = append $files (dict "volume" "nats-creds" "mountPath" "/etc/fcd/backends/nats-creds" "secret" $creds.name "key" $creds.key) -}}
{{- end -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{- define "fcd.backendMounts" -}}
{{- range (include "fcd.backendFiles" .) | fromJsonArray }}
- name: {{ .volume }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "fcd.backendVolumes" -}}
{{- range (include "fcd.backendFiles" .) | fromJsonArray }}
- name: {{ .volume }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 288 # 0440: owner and group read (decimal, as YAML 1.2 reads 0440 as 440)
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}
{{- end -}}
{{- define "fcd.env.internalAuth" -}}
{{ include "fcd.secretEnv" (dict "env" "INTERNAL_AUTH_SECRET" "ref" (include "fcd.secretRef" (dict "ctx" . "cfg" .Values.secrets.internalAuth "key" "internal-auth-secret" "what" "secrets.internalAuth"))) }}
{{- end -}}
{{- define "fcd.env.usageGrpc" -}}
{{ include "fcd.secretEnv" (dict "env" "USAGE_GRPC_SECRET" "ref" (include "fcd.secretRef" (dict "ctx" . "cfg" .Values.secrets.usageGrpc "key" "usage-grpc-secret" "what" "secrets.usageGrpc"))) }}
{{- end -}}
{{- define "fcd.env.webhookKey" -}}
{{ include "fcd.secretEnv" (dict "env" "WEBHOOK_SECRET_KEY" "ref" (include "fcd.secretRef" (dict "ctx" . "cfg" .Values.secrets.webhookEncryptionKey "key" "webhook-secret-key" "what" "secrets.webhookEncryptionKey"))) }}
{{- with .Values.secrets.webhookEncryptionKey }}
{{- if and .existingSecret .previousKeysKey }}
- name: WEBHOOK_SECRET_KEY_PREVIOUS
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .previousKeysKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Every env var of one service: (dict "ctx" $ "name" "gateway" "v" $serviceValues) */}}
{{- define "fcd.env" -}}
{{- $ctx := .ctx -}}
{{- $v := .v -}}
- name: PORT
  value: {{ $v.containerPorts.http | quote }}
- name: METRICS_PORT
  value: {{ $v.containerPorts.metrics | quote }}
- name: LOG_LEVEL
  value: {{ $ctx.Values.global.logLevel | quote }}
{{- if eq .name "gateway" }}
- name: HOST
  value: "0.0.0.0"
- name: USAGE_GRPC_ADDRESS
  value: {{ printf "dns:///%s-headless.%s.svc:%v" (include "fcd.componentName" (dict "ctx" $ctx "name" "usage")) $ctx.Release.Namespace $ctx.Values.usage.containerPorts.grpc | quote }}
- name: FACILITY_URL
  value: {{ printf "http://%s:%v" (include "fcd.componentName" (dict "ctx" $ctx "name" "facility")) $ctx.Values.facility.containerPorts.http | quote }}
- name: WEBHOOK_URL
  value: {{ printf "http://%s:%v" (include "fcd.componentName" (dict "ctx" $ctx "name" "webhook")) $ctx.Values.webhook.containerPorts.http | quote }}
{{ include "fcd.env.internalAuth" $ctx }}
{{ include "fcd.env.usageGrpc" $ctx }}
- name: REDIS_KEY_PREFIX
  value: {{ $ctx.Values.externalRedis.keyPrefix | quote }}
{{ include "fcd.env.redis" $ctx }}
{{- else if eq .name "usage" }}
- name: HOST
  value: "0.0.0.0"
- name: GRPC_PORT
  value: {{ $v.containerPorts.grpc | quote }}
- name: REDIS_KEY_PREFIX
  value: {{ $ctx.Values.externalRedis.keyPrefix | quote }}
- name: MIGRATE_ON_START
  value: {{ not $ctx.Values.migrations.enabled | quote }}
{{ include "fcd.env.database" $ctx }}
{{ include "fcd.env.redis" $ctx }}
{{ include "fcd.env.usageGrpc" $ctx }}
{{- $admin := include "fcd.secretRef" (dict "ctx" $ctx "cfg" $ctx.Values.secrets.adminToken "key" "admin-token" "what" "secrets.adminToken" "optional" true) }}
{{- if $admin }}
{{ include "fcd.secretEnv" (dict "env" "ADMIN_TOKEN" "ref" $admin) }}
{{- end }}
{{- else if eq .name "facility" }}
- name: HOST
  value: "0.0.0.0"
{{ include "fcd.env.database" $ctx }}
{{ include "fcd.env.nats" $ctx }}
{{ include "fcd.env.natsAuth" (dict "ctx" $ctx "name" "facility") }}
{{ include "fcd.env.internalAuth" $ctx }}
{{ include "fcd.secretEnv" (dict "env" "INGEST_TOKEN" "ref" (include "fcd.secretRef" (dict "ctx" $ctx "cfg" $ctx.Values.secrets.ingestToken "key" "ingest-token" "what" "secrets.ingestToken"))) }}
{{- with $ctx.Values.externalDatabase.listen }}
{{- if .existingSecret }}
{{ include "fcd.secretEnv" (dict "env" "OUTBOX_LISTEN_DATABASE_URL" "ref" (printf "%s/%s" .existingSecret .existingSecretKey)) }}
{{- end }}
{{- end }}
{{- else if eq .name "webhook" }}
- name: FACILITY_URL
  value: {{ printf "http://%s:%v" (include "fcd.componentName" (dict "ctx" $ctx "name" "facility")) $ctx.Values.facility.containerPorts.http | quote }}
{{ include "fcd.env.database" $ctx }}
{{ include "fcd.env.internalAuth" $ctx }}
{{ include "fcd.env.webhookKey" $ctx }}
- name: EVENT_RETENTION_DAYS
  value: {{ $ctx.Values.eventLog.retentionDays | quote }}
- name: WEBHOOK_ALLOWED_PORTS
  value: {{ join "," $ctx.Values.dispatcher.egress.allowedPorts | quote }}
{{- else if eq .name "dispatcher" }}
- name: USAGE_GRPC_ADDRESS
  value: {{ printf "%s:%v" (include "fcd.componentName" (dict "ctx" $ctx "name" "usage")) $ctx.Values.usage.containerPorts.grpc | quote }}
{{ include "fcd.env.database" $ctx }}
{{ include "fcd.env.nats" $ctx }}
{{ include "fcd.env.natsAuth" (dict "ctx" $ctx "name" "dispatcher") }}
{{ include "fcd.env.webhookKey" $ctx }}
{{ include "fcd.env.usageGrpc" $ctx }}
- name: EVENT_RETENTION_DAYS
  value: {{ $ctx.Values.eventLog.retentionDays | quote }}
- name: WEBHOOK_ALLOWED_PORTS
  value: {{ join "," $v.egress.allowedPorts | quote }}
{{- end }}
{{- range $k, $val := $v.env }}
- name: {{ $k }}
  value: {{ $val | toString | quote }}
{{- end }}
{{- with $ctx.Values.global.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Network policy peers ----------------------------------------------------------------- */}}

{{/* Pods of one component of this release: (dict "ctx" $ "name" "gateway") */}}
{{- define "fcd.peer" -}}
- podSelector:
    matchLabels:
      {{- include "fcd.selectorLabels" . | nindent 6 }}
{{- end -}}

{{/* Egress to an external dependency: (dict "to" $peers "port" 5432) */}}
{{- define "fcd.externalEgress" -}}
- ports:
    - protocol: TCP
      port: {{ .port }}
{{- with .to }}
  to:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{- define "fcd.dnsEgress" -}}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
{{- end -}}

{{/* Pod security --------------------------------------------------------------------------- */}}

{{- define "fcd.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/* The data of the chart-managed Secret (may be empty). Generated values are kept across
     upgrades by reading the live Secret (lookup is empty under `helm template`). */}}
{{- define "fcd.chartSecretData" -}}
{{- $live := (lookup "v1" "Secret" .Release.Namespace (include "fcd.chartSecretName" .)).data | default dict -}}
{{- with .Values.externalDatabase.url }}
database-url: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.externalRedis.url }}
redis-url: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.externalNats.url }}
nats-url: {{ . | b64enc | quote }}
{{- end }}
{{- if .Values.secrets.generate }}
{{- if not .Values.secrets.internalAuth.existingSecret }}
internal-auth-secret: {{ get $live "internal-auth-secret" | default (randAlphaNum 48 | b64enc) | quote }}
{{- end }}
{{- if not .Values.secrets.usageGrpc.existingSecret }}
usage-grpc-secret: {{ get $live "usage-grpc-secret" | default (randAlphaNum 48 | b64enc) | quote }}
{{- end }}
{{- if not .Values.secrets.webhookEncryptionKey.existingSecret }}
webhook-secret-key: {{ get $live "webhook-secret-key" | default (randBytes 32 | b64enc) | quote }}
{{- end }}
{{- if not .Values.secrets.ingestToken.existingSecret }}
ingest-token: {{ get $live "ingest-token" | default (randAlphaNum 48 | b64enc) | quote }}
{{- end }}
{{- if not .Values.secrets.adminToken.existingSecret }}
admin-token: {{ get $live "admin-token" | default (randAlphaNum 48 | b64enc) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "fcd.chartSecretNeeded" -}}
{{- if trim (include "fcd.chartSecretData" .) }}true{{ end -}}
{{- end -}}
