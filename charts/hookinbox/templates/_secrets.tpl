{{/*
Secrets as files, so that they rotate without a restart: every key of the
receiver's Secret (receiver.existingSecret, else existingSecret) that a
source names as its secrets_file under hookinbox.secretsDir is mounted
there, one file per key, in the receiver only (the worker does not verify,
and its configuration does not read them: see config.NeedWorker). The
kubelet updates the files when the Secret changes (within its sync period, about a minute;
never through a subPath mount, so none is used), and the receiver re-reads a
changed file within a second or so. An environment variable (${NAME}) is
read once, at start.
*/}}

{{/* The directory existingSecret's files are mounted in. */}}
{{- define "hookinbox.secretsDir" -}}/run/secrets/hookinbox{{- end -}}

{{/*
hookinbox.secretFileKeys: the keys the sources' secrets_file name, as a JSON
list. A secrets_file elsewhere than hookinbox.secretsDir fails: the chart
mounts nothing else.
*/}}
{{- define "hookinbox.secretFileKeys" -}}
{{- $dir := printf "%s/" (include "hookinbox.secretsDir" .) -}}
{{- $keys := list -}}
{{- range $i, $src := (default (list) (get (default (dict) .Values.config) "sources")) -}}
{{- with $src.secrets_file -}}
{{- $key := trimPrefix $dir . -}}
{{- if or (not (hasPrefix $dir .)) (not (regexMatch "^[-_a-zA-Z0-9][-._a-zA-Z0-9]*$" $key)) -}}
{{- fail (printf "config.sources[%d].secrets_file must be %sKEY, KEY a key of existingSecret: the chart mounts the Secret's keys there as files (not %q)" $i $dir .) -}}
{{- end -}}
{{- $keys = append $keys $key -}}
{{- end -}}
{{- end -}}
{{- $keys | uniq | toJson -}}
{{- end -}}

{{/* The Secret volume of the files, if a source reads one. */}}
{{- define "hookinbox.secretsVolume" -}}
{{- $keys := include "hookinbox.secretFileKeys" . | fromJsonArray -}}
{{- if $keys }}
- name: secrets
  secret:
    secretName: {{ include "hookinbox.componentSecret" (dict "ctx" . "component" "receiver") }}
    # 0440: readable by the pod's fsGroup, which owns the files.
    defaultMode: 288
    items:
      {{- range $keys }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- end }}
{{- end -}}

{{- define "hookinbox.secretsVolumeMount" -}}
{{- if include "hookinbox.secretFileKeys" . | fromJsonArray }}
- name: secrets
  mountPath: {{ include "hookinbox.secretsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}
