{{/* Names and labels. */}}
{{- define "corral.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "corral.labels" -}}
app.kubernetes.io/name: corral
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: serve, edge or core (pass a dict: root, component) */}}
{{- define "corral.selector" -}}
app.kubernetes.io/name: corral
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "corral.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The drain arithmetic (see values.yaml, drain). */}}
{{- define "corral.terminationGrace" -}}
{{ add .Values.drain.preStopSleepSeconds .Values.drain.windowSeconds .Values.drain.marginSeconds }}
{{- end -}}
{{- define "corral.shutdownTimeout" -}}
{{ sub (add .Values.drain.windowSeconds .Values.drain.marginSeconds) 1 }}s
{{- end -}}

{{/* The core URLs an edge links to: every core by its stable name. */}}
{{- define "corral.coreURLs" -}}
{{- $root := . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.core.replicas) -}}
{{- $urls = append $urls (printf "http://%s-core-%d.%s-core.%s.svc:%d" (include "corral.fullname" $root) $i (include "corral.fullname" $root) $root.Release.Namespace (int $root.Values.ports.core)) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/* Checks that fail the render with a clear message. */}}
{{- define "corral.validate" -}}
{{- if not (has .Values.mode (list "serve" "split")) -}}
{{- fail (printf "mode: want serve or split, got %q" .Values.mode) -}}
{{- end -}}
{{- if and (not .Values.auth.insecureDev) (not .Values.auth.jwtSecret.secretName) (not .Values.auth.jwtPublicKeys.secretName) -}}
{{- fail "auth: set auth.jwtSecret.secretName or auth.jwtPublicKeys.secretName (or auth.insecureDev for local development)" -}}
{{- end -}}
{{- if and (eq .Values.mode "split") (not .Values.apiKeys.secretName) (not .Values.auth.insecureDev) -}}
{{- fail "split mode: cores require API keys: set apiKeys.secretName" -}}
{{- end -}}
{{- if and (gt (int .Values.serve.internalPort) 0) (eq .Values.mode "serve") (not .Values.apiKeys.secretName) (not .Values.auth.insecureDev) -}}
{{- fail "serve.internalPort: the internal API requires API keys: set apiKeys.secretName" -}}
{{- end -}}
{{- $redis := or .Values.redis.url .Values.redis.secretName -}}
{{- if and (eq .Values.mode "split") (gt (int .Values.core.replicas) 1) (not $redis) -}}
{{- fail "split mode with several cores: they must share one Redis: set redis.url or redis.secretName" -}}
{{- end -}}
{{- if and (eq .Values.mode "serve") (gt (int .Values.serve.replicas) 1) (not $redis) -}}
{{- fail "serve mode with several replicas: they must share one Redis: set redis.url or redis.secretName" -}}
{{- end -}}
{{- if lt (int .Values.drain.marginSeconds) 2 -}}
{{- fail "drain.marginSeconds: at least 2 (corral's listeners get 2s after the drain)" -}}
{{- end -}}
{{- end -}}

{{/* Environment every corral container gets. */}}
{{- define "corral.env.common" -}}
- name: CORRAL_LOG_FORMAT
  value: json
- name: CORRAL_BACKLOG
  value: {{ .Values.backlog | quote }}
{{- if .Values.config }}
- name: CORRAL_CONFIG
  value: /etc/corral/config/corral.yaml
{{- end }}
{{- end -}}

{{/* The config file's text: config as YAML (a map), or as given (a string). */}}
{{- define "corral.configFile" -}}
{{- if kindIs "string" .Values.config -}}
{{ .Values.config }}
{{- else -}}
{{ toYaml .Values.config }}
{{- end -}}
{{- end -}}

{{/* Pod annotations: the user's, and the config file's checksum, so that a
change of the file rolls the pods. */}}
{{- define "corral.podAnnotations" -}}
{{- if or .Values.podAnnotations .Values.config }}
annotations:
  {{- with .Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- if .Values.config }}
  checksum/config: {{ include "corral.configFile" . | trim | sha256sum }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Redis settings (cores and serve). */}}
{{- define "corral.env.redis" -}}
{{- if .Values.redis.secretName }}
- name: CORRAL_REDIS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.secretName }}
      key: {{ .Values.redis.key }}
{{- else if .Values.redis.url }}
- name: CORRAL_REDIS
  value: {{ .Values.redis.url | quote }}
{{- end }}
- name: CORRAL_REDIS_PREFIX
  value: {{ .Values.redis.prefix | quote }}
{{- end -}}

{{/* Token verification and the drain (edges and serve). */}}
{{- define "corral.env.edge" -}}
{{- if .Values.auth.insecureDev }}
- name: CORRAL_INSECURE_DEV
  value: "true"
{{- end }}
{{- with .Values.auth.jwtSecret }}
{{- if .secretName }}
- name: CORRAL_JWT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- end }}
{{- if .Values.auth.jwtPublicKeys.secretName }}
- name: CORRAL_JWT_PUBLIC_KEYS
  value: /etc/corral/jwt/{{ .Values.auth.jwtPublicKeys.key }}
{{- end }}
{{- with .Values.auth.issuer }}
- name: CORRAL_JWT_ISSUER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.auth.audience }}
- name: CORRAL_JWT_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- with .Values.auth.origins }}
- name: CORRAL_ORIGINS
  value: {{ join "," . | quote }}
{{- end }}
- name: CORRAL_DRAIN_WINDOW
  value: {{ printf "%ds" (int .Values.drain.windowSeconds) | quote }}
- name: CORRAL_SHUTDOWN_TIMEOUT
  value: {{ include "corral.shutdownTimeout" . | quote }}
{{- end -}}

{{/* The internal API's accepted keys, as a mounted file (cores, serve). */}}
{{- define "corral.env.apiKeysFile" -}}
{{- if .Values.apiKeys.secretName }}
- name: CORRAL_API_KEYS_FILE
  value: /etc/corral/api-keys/{{ .Values.apiKeys.keysFileKey }}
{{- end }}
{{- end -}}

{{- define "corral.env.extra" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Pod-level settings shared by every component. */}}
{{- define "corral.podSpec.common" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
  {{- with .Values.sysctls }}
  sysctls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "corral.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* Probes on a port name. */}}
{{- define "corral.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 2
  failureThreshold: 2
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  failureThreshold: 3
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 1
  failureThreshold: 30
{{- end -}}

{{/* Volumes: JWT public keys (edges, serve), API keys (cores, serve), the config file (every pod). */}}
{{- define "corral.volumes" -}}
{{- $jwt := and .edge .root.Values.auth.jwtPublicKeys.secretName -}}
{{- $keys := and .core .root.Values.apiKeys.secretName -}}
{{- $config := .root.Values.config -}}
{{- if or $jwt $keys $config }}
volumes:
{{- if $config }}
  - name: config
    configMap:
      name: {{ include "corral.fullname" .root }}-config
{{- end }}
{{- if $jwt }}
  - name: jwt-public-keys
    secret:
      secretName: {{ .root.Values.auth.jwtPublicKeys.secretName }}
      items: [{key: {{ .root.Values.auth.jwtPublicKeys.key }}, path: {{ .root.Values.auth.jwtPublicKeys.key }}}]
{{- end }}
{{- if $keys }}
  - name: api-keys
    secret:
      secretName: {{ .root.Values.apiKeys.secretName }}
      items: [{key: {{ .root.Values.apiKeys.keysFileKey }}, path: {{ .root.Values.apiKeys.keysFileKey }}}]
{{- end }}
{{- end }}
{{- end -}}

{{- define "corral.volumeMounts" -}}
{{- $jwt := and .edge .root.Values.auth.jwtPublicKeys.secretName -}}
{{- $keys := and .core .root.Values.apiKeys.secretName -}}
{{- $config := .root.Values.config -}}
{{- if or $jwt $keys $config }}
volumeMounts:
{{- if $config }}
  - {name: config, mountPath: /etc/corral/config, readOnly: true}
{{- end }}
{{- if $jwt }}
  - {name: jwt-public-keys, mountPath: /etc/corral/jwt, readOnly: true}
{{- end }}
{{- if $keys }}
  - {name: api-keys, mountPath: /etc/corral/api-keys, readOnly: true}
{{- end }}
{{- end }}
{{- end -}}
