{{/* The chart's name (nameOverride). */}}
{{- define "jobsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The full name of the CronJob, ServiceAccount, Role and RoleBinding: jobsched-<release>, the name kustomize's
nameSuffix gives an install, or the release name when it already holds the chart's name. 52 characters at most:
the CronJob controller appends 11 to name its Jobs.
*/}}
{{- define "jobsched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "jobsched.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" $name .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The cluster-scoped capacity objects: the release and its namespace, so that no two releases share them. */}}
{{- define "jobsched.capacityName" -}}
{{- printf "%s-capacity-%s-%s" (include "jobsched.name" .) .Release.Name .Release.Namespace -}}
{{- end -}}

{{- define "jobsched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "jobsched.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the name of an existing ServiceAccount, when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image's tag: image.tag, else the chart's appVersion. It is also the version label. */}}
{{- define "jobsched.version" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "jobsched.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}{{- $repo = printf "%s/%s" .Values.image.registry $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (include "jobsched.version" .) -}}
{{- end -}}
{{- end -}}

{{/* The labels of every object and pod template (those of the kustomize install, with Helm's own). */}}
{{- define "jobsched.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "jobsched.selectorLabels" . }}
app.kubernetes.io/version: {{ include "jobsched.version" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: jobsched
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "jobsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "jobsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
jobsched.config: the text of jobsched.yaml. config given as a map gets the release's defaults (namespace, name,
job.template) and is written out as YAML; config given as the text of a file is kept as it is (its comments too) and
only checked. Either way the checks fail at `helm install` what would otherwise only fail at the first tick.
*/}}
{{- define "jobsched.config" -}}
{{- $text := kindIs "string" .Values.config -}}
{{- $cfg := dict -}}
{{- if $text -}}
{{- $cfg = fromYaml .Values.config -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "config: not YAML: %s" (get $cfg "Error")) -}}
{{- end -}}
{{- else -}}
{{- $cfg = deepCopy .Values.config -}}
{{- end -}}
{{- if and $cfg.namespace (ne (toString $cfg.namespace) .Release.Namespace) -}}
{{- fail (printf "config.namespace is %q but the release is in %q: jobsched's Role is granted only in the release's namespace" (toString $cfg.namespace) .Release.Namespace) -}}
{{- end -}}
{{- $job := default (dict) $cfg.job -}}
{{- if and $job.template (ne (toString $job.template) "job.yaml") -}}
{{- fail (printf "config.job.template is %q: the chart mounts jobTemplate as job.yaml next to jobsched.yaml; set job.template: job.yaml or leave it out" (toString $job.template)) -}}
{{- end -}}
{{- if $text -}}
{{- if not $cfg.name -}}
{{- fail "config: the file has no name (the scheduler's name, its jobsched.io/scheduler label)" -}}
{{- end -}}
{{- if not $job.template -}}
{{- fail "config: the file has no job.template; the chart mounts jobTemplate as job.yaml: set job.template: job.yaml" -}}
{{- end -}}
{{- .Values.config -}}
{{- else -}}
{{- if not $cfg.namespace -}}
{{- $_ := set $cfg "namespace" .Release.Namespace -}}
{{- end -}}
{{- if not $cfg.name -}}
{{- $_ := set $cfg "name" .Release.Name -}}
{{- end -}}
{{- $_ := set $job "template" "job.yaml" -}}
{{- $_ := set $cfg "job" $job -}}
{{- toYaml $cfg -}}
{{- end -}}
{{- end -}}

{{/* The variable the CronJob puts the DSN in: source.dsnEnv, default DATABASE_URL. */}}
{{- define "jobsched.dsnEnv" -}}
{{- $cfg := include "jobsched.config" . | fromYaml -}}
{{- $src := default (dict) $cfg.source -}}
{{- if $src.dsnFile -}}
{{- fail "config.source.dsnFile: the chart gives the DSN in an environment variable from database.secretName; use source.dsnEnv (or leave it unset)" -}}
{{- end -}}
{{- default "DATABASE_URL" $src.dsnEnv -}}
{{- end -}}

{{/* The cluster-scoped objects of limits.capacity: autoscale, named as the capacity ones. */}}
{{- define "jobsched.autoscaleName" -}}
{{- printf "%s-autoscale-%s-%s" (include "jobsched.name" .) .Release.Name .Release.Namespace -}}
{{- end }}
