{{/* Chart name, truncated for label values. */}}
{{- define "hookinbox.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the prefix of every object's name. */}}
{{- define "hookinbox.fullname" -}}
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

{{/* Labels of every object; pass (dict "ctx" $ "component" "receiver"). */}}
{{- define "hookinbox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hookinbox.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: hookinbox
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels; component is receiver, worker or migration. */}}
{{- define "hookinbox.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookinbox.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "hookinbox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hookinbox.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hookinbox.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "hookinbox.secretName" -}}
{{- required "existingSecret is required: the name of a Secret holding the database URL and the provider secrets (see the chart's README)" .Values.existingSecret -}}
{{- end -}}

{{/* The Secret of a component (receiver, worker, migration): its own existingSecret, else the common one; pass (dict "ctx" $ "component" "receiver"). */}}
{{- define "hookinbox.componentSecret" -}}
{{- $own := (index .ctx.Values .component).existingSecret -}}
{{- if $own -}}{{ $own }}{{- else -}}{{ include "hookinbox.secretName" .ctx }}{{- end -}}
{{- end -}}

{{/* Grace periods: the stop timeouts plus a margin, or the value set, which must exceed them. */}}
{{- define "hookinbox.receiverGrace" -}}
{{- $r := .Values.receiver -}}
{{- $stop := add $r.shutdownDelaySeconds $r.shutdownTimeoutSeconds -}}
{{- if kindIs "invalid" $r.terminationGracePeriodSeconds -}}
{{- add $stop $r.terminationMarginSeconds -}}
{{- else if le (int $r.terminationGracePeriodSeconds) (int $stop) -}}
{{- fail (printf "receiver.terminationGracePeriodSeconds (%d) must exceed receiver.shutdownDelaySeconds + receiver.shutdownTimeoutSeconds (%d)" (int $r.terminationGracePeriodSeconds) (int $stop)) -}}
{{- else -}}
{{- $r.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{- define "hookinbox.workerGrace" -}}
{{- $w := .Values.worker -}}
{{- $stop := add $w.softStopTimeoutSeconds $w.hardStopTimeoutSeconds -}}
{{- if kindIs "invalid" $w.terminationGracePeriodSeconds -}}
{{- add $stop $w.terminationMarginSeconds -}}
{{- else if le (int $w.terminationGracePeriodSeconds) (int $stop) -}}
{{- fail (printf "worker.terminationGracePeriodSeconds (%d) must exceed worker.softStopTimeoutSeconds + worker.hardStopTimeoutSeconds (%d)" (int $w.terminationGracePeriodSeconds) (int $stop)) -}}
{{- else -}}
{{- $w.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* hookinbox.isRef: "true" when the string is exactly one ${NAME} reference. */}}
{{- define "hookinbox.isRef" -}}
{{- if regexMatch "^\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}$" (toString .) -}}true{{- end -}}
{{- end -}}

{{/*
The config file: .Values.config with the keys the chart owns set from the
values. It fails on a key the chart owns, and on a secret, password or
database URL written out instead of referenced as ${NAME}.
*/}}
{{- define "hookinbox.config" -}}
{{- $cfg := deepCopy (default (dict) .Values.config) -}}
{{- $owned := dict "receiver" (list "listen" "ops_listen" "shutdown_delay" "shutdown_timeout") "worker" (list "listen" "soft_stop_timeout" "hard_stop_timeout" "ui") -}}
{{- range $section, $keys := $owned -}}
{{- $s := default (dict) (get $cfg $section) -}}
{{- range $keys -}}
{{- if hasKey $s . -}}
{{- fail (printf "config.%s.%s is set by the chart; use the chart's values instead (see its README)" $section .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $db := default (dict) (get $cfg "database") -}}
{{- if and (hasKey $db "url") (not (include "hookinbox.isRef" $db.url)) -}}
{{- fail "config.database.url must not be written in the values: the chart reads it from existingSecret (databaseUrlKey)" -}}
{{- end -}}
{{- range $i, $src := (default (list) (get $cfg "sources")) -}}
{{- range $j, $secret := (default (list) $src.secrets) -}}
{{- if not (include "hookinbox.isRef" $secret) -}}
{{- fail (printf "config.sources[%d].secrets[%d] must be a ${NAME} reference to a key of existingSecret, not the secret itself" $i $j) -}}
{{- end -}}
{{- end -}}
{{- range $j, $ba := (default (list) $src.basic_auth) -}}
{{- if not (include "hookinbox.isRef" $ba.password) -}}
{{- fail (printf "config.sources[%d].basic_auth[%d].password must be a ${NAME} reference to a key of existingSecret" $i $j) -}}
{{- end -}}
{{- end -}}
{{- if and $src.hmac $src.hmac.api_keys -}}
{{- range $j, $key := $src.hmac.api_keys -}}
{{- if not (include "hookinbox.isRef" $key) -}}
{{- fail (printf "config.sources[%d].hmac.api_keys[%d] must be a ${NAME} reference to a key of existingSecret" $i $j) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $receiver := default (dict) (get $cfg "receiver") -}}
{{- $_ := set $receiver "listen" (printf ":%d" (int .Values.receiver.port)) -}}
{{- $_ := set $receiver "ops_listen" (printf ":%d" (int .Values.receiver.opsPort)) -}}
{{- $_ := set $receiver "shutdown_delay" (printf "%ds" (int .Values.receiver.shutdownDelaySeconds)) -}}
{{- $_ := set $receiver "shutdown_timeout" (printf "%ds" (int .Values.receiver.shutdownTimeoutSeconds)) -}}
{{- if and .Values.receiver.ingress.enabled (not (hasKey $receiver "trusted_proxies")) -}}
{{- $_ := set $receiver "trusted_proxies" (default (list) .Values.receiver.ingress.trustedProxies) -}}
{{- end -}}
{{- $_ := set $cfg "receiver" $receiver -}}
{{- $worker := default (dict) (get $cfg "worker") -}}
{{- $_ := set $worker "listen" (printf ":%d" (int .Values.worker.port)) -}}
{{- $_ := set $worker "soft_stop_timeout" (printf "%ds" (int .Values.worker.softStopTimeoutSeconds)) -}}
{{- $_ := set $worker "hard_stop_timeout" (printf "%ds" (int .Values.worker.hardStopTimeoutSeconds)) -}}
{{- if .Values.worker.riverUI.enabled -}}
{{- $_ := set $worker "ui" (dict "enabled" true "read_only" .Values.worker.riverUI.readOnly "basic_auth" (list (dict "username" "${RIVERUI_USERNAME}" "password" "${RIVERUI_PASSWORD}"))) -}}
{{- end -}}
{{- $_ := set $cfg "worker" $worker -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
hookinbox.secretRefs: the ${NAME} references of the parts of the config a
component needs, comma-separated and sorted; pass (dict "ctx" $ "component"
"receiver"). The receiver's are in the sources (less their reconcile keys),
receiver and tracing; the worker's in worker, tracing and the sources'
reconcile keys (config.Needs: the worker needs no signing secret). The
database URL and River UI's credentials have entries of their own.
*/}}
{{- define "hookinbox.secretRefs" -}}
{{- $cfg := include "hookinbox.config" .ctx | fromYaml -}}
{{- $parts := list (default (dict) $cfg.tracing) -}}
{{- range $src := (default (list) $cfg.sources) -}}
{{- if eq $.component "receiver" -}}
{{- $parts = append $parts (omit $src "reconcile") -}}
{{- else -}}
{{- $parts = append $parts (default (dict) $src.reconcile) -}}
{{- end -}}
{{- end -}}
{{- $parts = append $parts (default (dict) (get $cfg .component)) -}}
{{- $names := list -}}
{{- range regexFindAll "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}" (toYaml $parts) -1 -}}
{{- $name := trimSuffix "}" (trimPrefix "${" .) -}}
{{- if not (has $name (list "HOOKINBOX_DATABASE_URL" "RIVERUI_USERNAME" "RIVERUI_PASSWORD")) -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- $names | uniq | sortAlpha | join "," -}}
{{- end -}}

{{/*
hookinbox.gomemlimit: GOMEMLIMIT for a memory limit (a Kubernetes quantity:
768Mi, 1Gi, 512M, bytes), goMemLimitPercent of it in MiB; empty without a
limit or with the percentage 0.
*/}}
{{- define "hookinbox.gomemlimit" -}}
{{- $limit := toString (default "" (dig "limits" "memory" "" (default (dict) .resources))) -}}
{{- $percent := int .percent -}}
{{- if and $limit (gt $percent 0) -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $m := regexFind "^[0-9]+" $limit -}}
{{- $unit := trimPrefix $m $limit -}}
{{- if or (not $m) (and $unit (not (hasKey $units $unit))) -}}
{{- fail (printf "resources.limits.memory %q: the chart derives GOMEMLIMIT from Ki, Mi, Gi, Ti, k, M, G, T or bytes; set goMemLimitPercent to 0 to derive none" $limit) -}}
{{- end -}}
{{- $bytes := mul (int64 $m) (int64 (default 1 (get $units $unit))) -}}
{{- printf "%dMiB" (div (mul $bytes $percent) 104857600) -}}
{{- end -}}
{{- end -}}

{{/*
Environment of the receiver and worker containers: the database URL, the
keys of existingSecret the component's config references (and those
only), and GOMEMLIMIT; pass (dict "ctx" $ "component" "receiver").
*/}}
{{- define "hookinbox.env" -}}
{{- $secret := include "hookinbox.componentSecret" . -}}
{{- $values := index .ctx.Values .component -}}
- name: HOOKINBOX_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ .ctx.Values.databaseUrlKey }}
{{- range $name := splitList "," (include "hookinbox.secretRefs" .) }}
{{- if $name }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $name }}
{{- end }}
{{- end }}
{{- $extra := list -}}
{{- range (default (list) $values.extraEnv) }}{{ $extra = append $extra .name }}{{ end -}}
{{- with include "hookinbox.gomemlimit" (dict "resources" $values.resources "percent" .ctx.Values.goMemLimitPercent) }}
{{- if not (has "GOMEMLIMIT" $extra) }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The config volume and a writable /tmp, on a read-only root filesystem. */}}
{{- define "hookinbox.volumes" -}}
- name: config
  configMap:
    name: {{ include "hookinbox.fullname" . }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "hookinbox.volumeMounts" -}}
- name: config
  mountPath: /etc/hookinbox
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Topology spread constraints with the component's labelSelector added. */}}
{{- define "hookinbox.topologySpread" -}}
{{- $ctx := .ctx -}}
{{- $component := .component -}}
{{- range .constraints }}
{{ "- " }}{{ toYaml (merge (dict "labelSelector" (dict "matchLabels" (fromYaml (include "hookinbox.selectorLabels" (dict "ctx" $ctx "component" $component))))) .) | nindent 2 | trim }}
{{- end }}
{{- end -}}

{{/* Worker autoscaling: at most one of the HPA and KEDA. */}}
{{- define "hookinbox.workerAutoscaled" -}}
{{- $a := .Values.worker.autoscaling -}}
{{- if and $a.hpa.enabled $a.keda.enabled -}}
{{- fail "worker.autoscaling: enable either hpa or keda, not both (they would fight over the worker's replicas)" -}}
{{- end -}}
{{- if or $a.hpa.enabled $a.keda.enabled -}}true{{- end -}}
{{- end -}}

{{/*
hookinbox.maxBodyBytes: the largest body limit of the sources in config, as
the receiver derives it: a source's max_body_bytes, else its provider's
preset (pkg/provider: github 25 MiB; TestChartKnowsTheBodyPresets keeps
this list in step), else receiver.max_body_bytes, else 1 MiB.
*/}}
{{- define "hookinbox.maxBodyBytes" -}}
{{- $cfg := default (dict) .Values.config -}}
{{- $receiver := default (dict) (get $cfg "receiver") -}}
{{- $default := int64 (default 1048576 (get $receiver "max_body_bytes")) -}}
{{- $presets := dict "github" 26214400 -}}
{{- $max := $default -}}
{{- $sources := default (list) (get $cfg "sources") -}}
{{- if $sources -}}
{{- $max = 0 -}}
{{- end -}}
{{- range $sources -}}
{{- $limit := int64 (default (default $default (get $presets (toString .provider))) .max_body_bytes) -}}
{{- if gt $limit (int64 $max) -}}
{{- $max = $limit -}}
{{- end -}}
{{- end -}}
{{- $max -}}
{{- end -}}

{{/* hookinbox.proxyBodySize: receiver.ingress.proxyBodySize, or maxBodyBytes rounded up to MiB. */}}
{{- define "hookinbox.proxyBodySize" -}}
{{- with .Values.receiver.ingress.proxyBodySize -}}
{{- . -}}
{{- else -}}
{{- printf "%dm" (div (add (include "hookinbox.maxBodyBytes" . | int64) 1048575) 1048576) -}}
{{- end -}}
{{- end -}}
