{{/* Names ---------------------------------------------------------------------- */}}

{{- define "noema.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "noema.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: (dict "root" $ "component" "ledger") */}}
{{- define "noema.componentName" -}}
{{- printf "%s-%s" (include "noema.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "noema.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "noema.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels --------------------------------------------------------------------- */}}

{{- define "noema.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "noema.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: noema
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* (dict "root" $ "component" "ledger") */}}
{{- define "noema.componentLabels" -}}
{{ include "noema.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "noema.selectorLabels" -}}
app.kubernetes.io/name: {{ include "noema.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image ---------------------------------------------------------------------- */}}

{{- define "noema.image" -}}
{{- $repo := required "image.repository is required" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}
{{- end -}}

{{/* Checks --------------------------------------------------------------------- */}}

{{- define "noema.validate" -}}
{{- if not (has .Values.mode (list "allInOne" "split")) -}}
{{- fail (printf "mode must be allInOne or split, not %q" (toString .Values.mode)) -}}
{{- end -}}
{{- if eq .Values.mode "split" -}}
{{- if not .Values.secrets.existingSecret -}}
{{- fail "mode=split needs secrets.existingSecret: the name of a Secret holding <service>-database-url keys and owner-token-sha256 (create it before installing; see docs/deploy.md)" -}}
{{- end -}}
{{- $enabled := include "noema.enabledServices" . | fromJsonArray -}}
{{- if not $enabled -}}
{{- fail "mode=split needs at least one enabled entry in services" -}}
{{- end -}}
{{- range $name, $svc := (include "noema.services" . | fromJson) -}}
{{- if not (regexMatch "^[a-z][a-z0-9]*$" $name) -}}
{{- fail (printf "services.%s: a service name is a lowercase word (it names the role, `noema serve %s`)" $name $name) -}}
{{- end -}}
{{- if eq $name "gateway" -}}
{{- fail "services.gateway: the gateway is configured under the top-level `gateway` key" -}}
{{- end -}}
{{- if not $svc.grpcService -}}
{{- fail (printf "services.%s.grpcService is required (its grpc.health.v1 service name, e.g. noema.%s.v1.…Service)" $name $name) -}}
{{- end -}}
{{- if and $svc.objectStore (not $.Values.s3.bucket) -}}
{{- fail (printf "services.%s.objectStore needs s3.bucket" $name) -}}
{{- end -}}
{{- range $peer := ($svc.calls | default list) -}}
{{- if not (has $peer $enabled) -}}
{{- fail (printf "services.%s.calls names %q, which is not an enabled service" $name $peer) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The enabled services with serviceDefaults applied, as a JSON object name -> settings.
An entry's own keys win; maps (resources, pdb, autoscaling…) merge one level deep.
Use: range $name, $svc := include "noema.services" . | fromJson
*/}}
{{- define "noema.services" -}}
{{- $out := dict -}}
{{- $defaults := .Values.serviceDefaults | default dict -}}
{{- range $name, $entry := .Values.services -}}
{{- $svc := $entry | default dict -}}
{{- if dig "enabled" (dig "enabled" true $defaults) $svc -}}
{{- $m := dict -}}
{{- range $k, $v := $defaults -}}
{{- if hasKey $svc $k -}}
{{- $own := get $svc $k -}}
{{- if and (kindIs "map" $v) (kindIs "map" $own) -}}
{{- $sub := deepCopy $v -}}
{{- range $k2, $v2 := $own -}}
{{- $_ := set $sub $k2 $v2 -}}
{{- end -}}
{{- $_ := set $m $k $sub -}}
{{- else -}}
{{- $_ := set $m $k $own -}}
{{- end -}}
{{- else -}}
{{- $_ := set $m $k (deepCopy $v) -}}
{{- end -}}
{{- end -}}
{{- range $k, $v := $svc -}}
{{- if not (hasKey $m $k) -}}
{{- $_ := set $m $k $v -}}
{{- end -}}
{{- end -}}
{{- $_ := set $out $name $m -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The enabled services' names, sorted, as a JSON array. */}}
{{- define "noema.enabledServices" -}}
{{- keys (include "noema.services" . | fromJson) | sortAlpha | toJson -}}
{{- end -}}

{{/* Configuration -------------------------------------------------------------- */}}

{{/* Settings common to every noema process (a YAML map of strings). */}}
{{- define "noema.commonEnv" -}}
{{- $root := .root -}}
{{- $c := $root.Values.config -}}
{{- $env := dict
  "NOEMA__TELEMETRY__LOG_FORMAT" ($c.logFormat | toString)
  "NOEMA__TELEMETRY__LOG_FILTER" ($c.logFilter | toString)
  "NOEMA__TELEMETRY__SERVICE_NAME" (ternary "noema" (printf "noema-%s" .component) (eq .component "all-in-one"))
  "NOEMA__SERVER__SHUTDOWN_GRACE_SECS" ($c.shutdownGraceSecs | int64 | toString)
  "NOEMA__AUTH__CACHE_TTL_SECS" ($c.authCacheTtlSecs | int64 | toString)
-}}
{{- if $c.otlpEndpoint -}}
{{- $_ := set $env "OTEL_EXPORTER_OTLP_ENDPOINT" ($c.otlpEndpoint | toString) -}}
{{- end -}}
{{- range $k, $v := $c.env -}}
{{- $_ := set $env $k ($v | toString) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* The gRPC address of an enabled service: (dict "root" $ "service" "identity") */}}
{{- define "noema.endpoint" -}}
{{- printf "http://%s:%d" (include "noema.componentName" (dict "root" .root "component" .service)) (int .root.Values.ports.grpc) -}}
{{- end -}}

{{/* The S3 URL of a service: (dict "root" $ "name" "ledger" "svc" $svc) */}}
{{- define "noema.objectStoreUrl" -}}
{{- $s3 := .root.Values.s3 -}}
{{- $query := list -}}
{{- if $s3.region -}}{{- $query = append $query (printf "region=%s" $s3.region) -}}{{- end -}}
{{- if $s3.endpoint -}}{{- $query = append $query (printf "endpoint=%s" $s3.endpoint) -}}{{- end -}}
{{- if $s3.createBucket -}}{{- $query = append $query "create_bucket=true" -}}{{- end -}}
{{- $url := printf "%s://%s/%s" (default "s3" .svc.objectStoreScheme) $s3.bucket (default .name .svc.objectStorePrefix) -}}
{{- if $query -}}{{- $url = printf "%s?%s" $url (join "&" $query) -}}{{- end -}}
{{- $url -}}
{{- end -}}

{{/* The ConfigMap data of a split component: (dict "root" $ "component" name "svc" $svc) */}}
{{- define "noema.componentEnv" -}}
{{- $root := .root -}}
{{- $name := .component -}}
{{- $env := include "noema.commonEnv" . | fromYaml -}}
{{- $host := $root.Values.config.listenHost | toString -}}
{{- $enabled := include "noema.enabledServices" $root | fromJsonArray -}}
{{- if eq $name "gateway" -}}
{{- $_ := set $env "NOEMA__SERVER__HTTP_ADDR" (printf "%s:%d" $host (int $root.Values.ports.http)) -}}
{{- $_ := set $env "NOEMA__GATEWAY__REQUEST_TIMEOUT_SECS" ($root.Values.config.gateway.requestTimeoutSecs | int64 | toString) -}}
{{- $_ := set $env "NOEMA__GATEWAY__MAX_BODY_BYTES" ($root.Values.config.gateway.maxBodyBytes | int64 | toString) -}}
{{- range $peer := $enabled -}}
{{- $_ := set $env (printf "NOEMA__ENDPOINTS__%s" (upper $peer)) (include "noema.endpoint" (dict "root" $root "service" $peer)) -}}
{{- end -}}
{{- range $k, $v := $root.Values.gateway.env -}}
{{- $_ := set $env $k ($v | toString) -}}
{{- end -}}
{{- else -}}
{{- $svc := .svc -}}
{{- $section := upper $name -}}
{{- $_ := set $env "NOEMA__SERVER__GRPC_ADDR" (printf "%s:%d" $host (int $root.Values.ports.grpc)) -}}
{{- if $root.Values.metrics.enabled -}}
{{- $_ := set $env "NOEMA__SERVER__METRICS_ADDR" (printf "%s:%d" $host (int $root.Values.ports.metrics)) -}}
{{- end -}}
{{- if $svc.database -}}
{{- $_ := set $env (printf "NOEMA__%s__MAX_CONNECTIONS" $section) ($root.Values.postgres.maxConnections | int64 | toString) -}}
{{- end -}}
{{- if $svc.objectStore -}}
{{- $_ := set $env (printf "NOEMA__%s__OBJECT_STORE_URL" $section) (include "noema.objectStoreUrl" (dict "root" $root "name" $name "svc" $svc)) -}}
{{- if $root.Values.s3.region -}}
{{- $_ := set $env "AWS_REGION" ($root.Values.s3.region | toString) -}}
{{- end -}}
{{- end -}}
{{- range $peer := ($svc.calls | default list) -}}
{{- $_ := set $env (printf "NOEMA__ENDPOINTS__%s" (upper $peer)) (include "noema.endpoint" (dict "root" $root "service" $peer)) -}}
{{- end -}}
{{- range $k, $v := $svc.env -}}
{{- $_ := set $env $k ($v | toString) -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* Secret-sourced env of a split service: (dict "root" $ "component" name "svc" $svc) */}}
{{- define "noema.secretEnv" -}}
{{- $root := .root -}}
{{- $svc := .svc -}}
{{- $secret := $root.Values.secrets.existingSecret -}}
{{- if $svc.database }}
- name: {{ printf "NOEMA__%s__DATABASE_URL" (upper .component) }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ default (printf "%s-database-url" .component) $svc.databaseUrlKey }}
{{- end }}
{{- if $svc.ownerToken }}
- name: NOEMA__AUTH__OWNER_TOKEN_SHA256
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $root.Values.secrets.ownerTokenSha256Key }}
{{- end }}
{{- if and $svc.objectStore $root.Values.s3.credentials.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.s3.credentials.existingSecret }}
      key: {{ $root.Values.s3.credentials.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.s3.credentials.existingSecret }}
      key: {{ $root.Values.s3.credentials.secretAccessKeyKey }}
{{- end }}
{{- end -}}

{{/* Pod pieces ----------------------------------------------------------------- */}}

{{- define "noema.podSecurity" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "noema.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{- define "noema.lifecycle" -}}
{{- if gt (int .Values.preStopSleepSeconds) 0 }}
lifecycle:
  preStop:
    exec:
      command: ["sleep", {{ .Values.preStopSleepSeconds | toString | quote }}]
{{- end }}
{{- end -}}

{{/* probe timings: (dict "root" $ "kind" "liveness") */}}
{{- define "noema.probeTimings" -}}
{{- with (index .root.Values.probes .kind) }}
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end }}
{{- end -}}

{{/* The pod's scheduling: (dict "root" $ "component" name "cfg" $componentValues) */}}
{{- define "noema.scheduling" -}}
{{- with .cfg.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and .root.Values.topologySpread.enabled (ne .root.Values.mode "allInOne") }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: {{ .root.Values.topologySpread.topologyKey }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "noema.selectorLabels" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The all-in-one pod's ConfigMap data: (dict "root" $ "component" "all-in-one") */}}
{{- define "noema.allInOneEnv" -}}
{{- $root := .root -}}
{{- $env := include "noema.commonEnv" . | fromYaml -}}
{{- $_ := set $env "NOEMA__GATEWAY__REQUEST_TIMEOUT_SECS" ($root.Values.config.gateway.requestTimeoutSecs | int64 | toString) -}}
{{- $_ := set $env "NOEMA__GATEWAY__MAX_BODY_BYTES" ($root.Values.config.gateway.maxBodyBytes | int64 | toString) -}}
{{- range $k, $v := $root.Values.allInOne.env -}}
{{- $_ := set $env $k ($v | toString) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* NetworkPolicy pieces -------------------------------------------------------- */}}

{{/* One rule: (dict "key" "to"|"from" "peers" list "ports" list "protocols" list) */}}
{{- define "noema.npRule" -}}
{{- if not .ports -}}
{{- fail (printf "networkPolicy: a rule %s %s has no ports (it would allow every port)" .key (toJson .peers)) -}}
{{- end -}}
- ports:
    {{- range $port := .ports }}
    {{- range $proto := ($.protocols | default (list "TCP")) }}
    - port: {{ $port }}
      protocol: {{ $proto }}
    {{- end }}
    {{- end }}
  {{- if .peers }}
  {{ .key }}:
    {{- toYaml .peers | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* Egress every noema pod gets: DNS, OTLP when configured, extraEgress. (root) */}}
{{- define "noema.npEgressCommon" -}}
{{- $np := .Values.networkPolicy -}}
{{ include "noema.npRule" (dict "key" "to" "peers" $np.dns.to "ports" $np.dns.ports "protocols" (list "UDP" "TCP")) }}
{{- if .Values.config.otlpEndpoint }}
{{ include "noema.npRule" (dict "key" "to" "peers" $np.otlp.to "ports" $np.otlp.ports) }}
{{- end }}
{{- with $np.extraEgress }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The S3 egress ports: networkPolicy.s3.ports plus s3.endpoint's port. (root) */}}
{{- define "noema.s3Ports" -}}
{{- $ports := .Values.networkPolicy.s3.ports | default list -}}
{{- with .Values.s3.endpoint -}}
{{- $u := urlParse . -}}
{{- $hostPort := splitList ":" $u.host -}}
{{- $port := ternary (last $hostPort) (ternary "80" "443" (eq $u.scheme "http")) (gt (len $hostPort) 1) -}}
{{- $ports = append $ports (int $port) -}}
{{- end -}}
{{- $ports | uniq | toJson -}}
{{- end -}}

{{/* A component's pod selector as a NetworkPolicy peer: (dict "root" $ "component" c) */}}
{{- define "noema.npPeer" -}}
- podSelector:
    matchLabels:
      {{- include "noema.selectorLabels" . | nindent 6 }}
{{- end -}}
