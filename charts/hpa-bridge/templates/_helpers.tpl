{{/* The release's full name: the release name, or release-chart when it lacks the chart's. */}}
{{- define "hpa-bridge.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hpa-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hpa-bridge.labels" -}}
{{ include "hpa-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "hpa-bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hpa-bridge.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the serving certificate; empty with tls.mode selfSigned. */}}
{{- define "hpa-bridge.tlsSecret" -}}
{{- if eq .Values.tls.mode "certManager" -}}
{{- printf "%s-serving" (include "hpa-bridge.fullname" .) -}}
{{- else if eq .Values.tls.mode "existingSecret" -}}
{{- required "tls.existingSecret.name is required with tls.mode existingSecret" .Values.tls.existingSecret.name -}}
{{- end -}}
{{- end -}}

{{/*
How the aggregator verifies the adapter: an injected or given caBundle, or no verification
for a certificate no CA vouches for. Never both (a caBundle with insecureSkipTLSVerify is
rejected by the API server).
*/}}
{{- define "hpa-bridge.apiServiceTLS" -}}
{{- if and (eq .Values.tls.mode "existingSecret") .Values.tls.existingSecret.caBundle -}}
caBundle: {{ .Values.tls.existingSecret.caBundle }}
{{- else if ne .Values.tls.mode "certManager" -}}
insecureSkipTLSVerify: true
{{- end -}}
{{- end -}}

{{/* One APIService of the adapter: dict "root" $ "group" g "version" v "versionPriority" p. */}}
{{- define "hpa-bridge.apiService" -}}
{{- $root := .root -}}
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {{ printf "%s.%s" .version .group }}
  labels:
    {{- include "hpa-bridge.labels" $root | nindent 4 }}
  {{- if eq $root.Values.tls.mode "certManager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ printf "%s/%s" $root.Release.Namespace (include "hpa-bridge.tlsSecret" $root) }}
  {{- end }}
spec:
  group: {{ .group }}
  version: {{ .version }}
  service:
    name: {{ include "hpa-bridge.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    port: 443
  groupPriorityMinimum: 100
  versionPriority: {{ .versionPriority }}
  {{- include "hpa-bridge.apiServiceTLS" $root | nindent 2 }}
{{- end -}}
