{{/* The objects' base name: the release's, or "<release>-inference-portal". */}}
{{- define "portal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "portal.serviceAccountName" -}}{{ .Values.serviceAccount.name | default (include "portal.fullname" .) }}{{- end -}}

{{/* Labels of every object; "component" adds app.kubernetes.io/component. */}}
{{- define "portal.labels" -}}
app.kubernetes.io/part-of: inference-portal
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .component }}
{{ include "portal.selector" (dict "root" $.root "component" .) }}
{{- end }}
{{- end -}}

{{- define "portal.selector" -}}
app.kubernetes.io/name: inference-portal
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Secret references of DATABASE_URL and CELERY_BROKER_URL: a literal url, else a Secret key. */}}
{{- define "portal.urlEnv" -}}
- name: {{ .env }}
{{- if .value.url }}
  value: {{ .value.url | quote }}
{{- else }}
  valueFrom:
    secretKeyRef:
      name: {{ .value.secretKeyRef.name | default .root.Values.existingSecret }}
      key: {{ .value.secretKeyRef.key }}
{{- end }}
{{- end -}}

{{/* The pod spec every process shares: non-root, no privileges, read-only root, a writable /tmp.
     Arguments: root, component, command (list), account (bool: gets the ServiceAccount's token),
     extra (YAML merged into the container: ports, probes). */}}
{{- define "portal.podSpec" -}}
{{ if .account -}}
serviceAccountName: {{ include "portal.serviceAccountName" .root }}
{{ else -}}
automountServiceAccountToken: false
{{ end -}}
{{ with .pod -}}
{{ . }}
{{ end -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  seccompProfile: {type: RuntimeDefault}
containers:
  - name: {{ .component }}
    image: {{ printf "%s:%s" .root.Values.image.repository (.root.Values.image.tag | default .root.Chart.AppVersion) | quote }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    command: {{ toJson .command }}
    envFrom:
      - configMapRef: {name: {{ include "portal.fullname" .root }}}
      - secretRef: {name: {{ .root.Values.existingSecret }}}
    env:
      {{- include "portal.urlEnv" (dict "root" .root "env" "DATABASE_URL" "value" .root.Values.database) | nindent 6 }}
      {{- include "portal.urlEnv" (dict "root" .root "env" "CELERY_BROKER_URL" "value" .root.Values.redis) | nindent 6 }}
    {{- with .extra }}
    {{- . | trim | nindent 4 }}
    {{- end }}
    resources: {{ toJson (get .root.Values.resources .component) }}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    volumeMounts: [{name: tmp, mountPath: /tmp}]
volumes: [{name: tmp, emptyDir: {}}]
{{- end -}}

{{/* A Deployment of one process. Arguments as portal.podSpec, plus replicas and strategy. */}}
{{- define "portal.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "portal.fullname" .root }}-{{ .component }}
  labels: {{- include "portal.labels" . | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  {{- with .strategy }}
  strategy: {type: {{ . }}}
  {{- end }}
  selector:
    matchLabels: {{- include "portal.selector" . | nindent 6 }}
  template:
    metadata:
      labels: {{- include "portal.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include (print .root.Template.BasePath "/config.yaml") .root | sha256sum }}
    spec: {{- include "portal.podSpec" . | nindent 6 }}
{{- end -}}
