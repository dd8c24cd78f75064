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
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, update, delete]
- apiGroups: [hotreload.dev]
  resources: [configrollouts]
  verbs: [list, watch, patch]
- apiGroups: [hotreload.dev]
  resources: [configrollouts/status]
  verbs: [update]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
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
{{- $i := .Values.injector -}}
{{- if not (has $i.nativeSidecars (list "auto" "true" "false")) -}}
{{- fail (printf "injector.nativeSidecars %q: must be auto, true or false" (toString $i.nativeSidecars)) -}}
{{- end -}}
{{- if not (has $i.contentKey (list "create" "existing" "off")) -}}
{{- fail (printf "injector.contentKey %q: must be create, existing or off" $i.contentKey) -}}
{{- end -}}
{{- if not (has $i.certs.source (list "self" "cert-manager")) -}}
{{- fail (printf "injector.certs.source %q: must be self or cert-manager" $i.certs.source) -}}
{{- end -}}
{{- if not (has $i.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "injector.failurePolicy %q: must be Ignore or Fail" $i.failurePolicy) -}}
{{- end -}}
{{- if or (lt (int $i.timeoutSeconds) 1) (gt (int $i.timeoutSeconds) 30) -}}
{{- fail (printf "injector.timeoutSeconds %v: must be from 1 to 30" $i.timeoutSeconds) -}}
{{- end -}}
{{- if and $i.enabled (eq (int $i.port) (int .Values.controller.port)) -}}
{{- fail (printf "injector.port %v: the same as controller.port" $i.port) -}}
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


{{/* The injector's objects: hotreload-injector for a release named hotreload. */}}
{{- define "hotreload.injector.name" -}}
{{- printf "%s-injector" (include "hotreload.fullname" .) -}}
{{- end -}}

{{/* The Secret of the webhook's serving certificate. */}}
{{- define "hotreload.injector.secret" -}}
{{- printf "%s-injector-tls" (include "hotreload.fullname" .) -}}
{{- end -}}

{{/*
The injector's rules where it injects: get the content key Secret by name
and create it (RBAC cannot limit create to a name; the secrets policy
does), and Events on pods and their owners.
*/}}
{{- define "hotreload.injector.rules" -}}
{{- if ne .Values.injector.contentKey "off" }}
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [hotreload-content-key]
  verbs: [get]
{{- end }}
{{- if eq .Values.injector.contentKey "create" }}
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
{{- end }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
