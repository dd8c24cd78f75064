{{/*
The release-and-chart name, as Helm charts usually make it: the release's
name alone when it already holds the chart's.
*/}}
{{- define "hotreload.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of the controller's objects: hotreload-controller for a release named hotreload. */}}
{{- define "hotreload.controller.name" -}}
{{- printf "%s-controller" (include "hotreload.fullname" .) -}}
{{- end -}}

{{- define "hotreload.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "hotreload.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/name: {{ include "hotreload.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: hotreload
{{- end -}}

{{/* The controller's selector: what its Deployment, Service, PDB and NetworkPolicy select. */}}
{{- define "hotreload.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hotreload.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "hotreload.controller.labels" -}}
{{ include "hotreload.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "hotreload.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hotreload.controller.name" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hotreload.leaseName" -}}
{{- default (include "hotreload.controller.name" .) .Values.controller.leaderElection.leaseName -}}
{{- end -}}

{{/* image: repository@digest, or repository:tag with the appVersion as the default tag. */}}
{{- define "hotreload.image" -}}
{{- $img := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The rules the controller needs where it watches: list and watch (informers
never get single objects) ConfigMaps, Secrets by metadata, and pods; patch
pods. A metadata-only watch of Secrets still needs list and watch on
secrets; the API server sends no data in it.
*/}}
{{- define "hotreload.controller.rules" -}}
- apiGroups: [""]
  resources: [configmaps{{ if .Values.controller.watchSecrets }}, secrets{{ end }}]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, patch]
{{- end -}}

{{/* The controller's job label, for the alerts: the Service's name, as the ServiceMonitor scrapes it. */}}
{{- define "hotreload.controllerJob" -}}
{{- default (include "hotreload.controller.name" .) .Values.prometheusRule.controllerJob -}}
{{- end -}}

{{/* A metric with the sidecar selector: (list "name" $) -> name{selector}. */}}
{{- define "hotreload.sidecarMetric" -}}
{{- $name := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $root.Values.prometheusRule.sidecarSelector -}}
{{- printf "%s{%s}" $name $root.Values.prometheusRule.sidecarSelector -}}
{{- else -}}
{{- $name -}}
{{- end -}}
{{- end -}}

{{/* Bad combinations of values, each refused in one line. */}}
{{- define "hotreload.validate" -}}
{{- if .Values.injector.enabled -}}
{{- fail "injector.enabled: the injector is not part of this chart version yet (issue #24); leave it false" -}}
{{- end -}}
{{- if and (gt (int .Values.controller.replicas) 1) (not .Values.controller.leaderElection.enabled) -}}
{{- fail (printf "controller.replicas %d with leaderElection.enabled false: every replica would patch pods; use one replica or leader election" (int .Values.controller.replicas)) -}}
{{- end -}}
{{- if lt (int .Values.controller.replicas) 1 -}}
{{- fail "controller.replicas: must be at least 1" -}}
{{- end -}}
{{- if or (lt (int .Values.controller.workers) 1) (gt (int .Values.controller.workers) 100) -}}
{{- fail (printf "controller.workers %v: must be from 1 to 100" .Values.controller.workers) -}}
{{- end -}}
{{- range .Values.controller.namespaces -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString .)) -}}
{{- fail (printf "controller.namespaces: %q is not a namespace name" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.controller.logLevel (list "debug" "info" "warn" "error")) -}}
{{- fail (printf "controller.logLevel %q: must be debug, info, warn or error" .Values.controller.logLevel) -}}
{{- end -}}
{{- if not (has .Values.controller.logFormat (list "logfmt" "json")) -}}
{{- fail (printf "controller.logFormat %q: must be logfmt or json" .Values.controller.logFormat) -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled .Values.networkPolicy.egress.enabled (not .Values.networkPolicy.egress.apiServerCIDRs) -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.apiServerCIDRs: the API server's addresses (kubectl get endpoints kubernetes -n default)" -}}
{{- end -}}
{{- end -}}
