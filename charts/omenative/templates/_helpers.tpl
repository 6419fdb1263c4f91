{{/*
The labels every object carries, as `kubectl apply -k config/` sets them (config/kustomization.yaml),
with Helm as the manager. `omenative install`/`uninstall` tell omenative's objects by part-of.
*/}}
{{- define "omenative.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/name: omenative
app.kubernetes.io/part-of: omenative
{{- end -}}

{{/*
The manager pods' labels (selected by the Deployment, the webhook and metrics Services and the
PodMonitor). The selector is only app.kubernetes.io/name: it never changes between versions.
*/}}
{{- define "omenative.podLabels" -}}
app.kubernetes.io/name: omenative-manager
app.kubernetes.io/part-of: omenative
app.kubernetes.io/component: manager
{{- end -}}

{{/*
Include every generated file of a folder (made by `make chart` from config/), as it is.
Argument: (list $ "files/config/crds/*.yaml").
*/}}
{{- define "omenative.files" -}}
{{- $root := index . 0 -}}
{{- range $path, $_ := $root.Files.Glob (index . 1) }}
---
{{ $root.Files.Get $path }}
{{- end }}
{{- end -}}

{{/*
Helm drops a key set to null from the merged values, and the manager reads an absent key as
its default: put back, as null, every key of the chart's defaults that the merged values lack,
so `--set ome.controller.lifecycle.instanceReadyTimeout=null` turns the deadline off.
Argument: (list DEFAULTS MERGED); MERGED is changed in place.
*/}}
{{- define "omenative.restoreNulls" -}}
{{- $defaults := index . 0 -}}
{{- $merged := index . 1 -}}
{{- range $key, $value := $defaults -}}
{{- if not (hasKey $merged $key) -}}
{{- $_ := set $merged $key nil -}}
{{- else if and (kindIs "map" $value) (kindIs "map" (index $merged $key)) -}}
{{- include "omenative.restoreNulls" (list $value (index $merged $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A ConfigMap block of ome.controller as JSON, nulls put back. Argument: (list $ "lifecycle").
*/}}
{{- define "omenative.block" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $defaults := index ($root.Files.Get "files/defaults/ome-controller.yaml" | fromYaml) $key | default dict -}}
{{- $merged := deepCopy (index $root.Values.ome.controller $key | default dict) -}}
{{- include "omenative.restoreNulls" (list $defaults $merged) -}}
{{- toJson $merged -}}
{{- end -}}

{{/*
The webhook's serving-certificate Secret: cert-manager's (config/webhook/certificate.yaml), the
one named in omenative.webhook.secretName, or else the one the chart makes (omenative.selfSignedCert).
*/}}
{{- define "omenative.webhookSecret" -}}
{{- $wh := .Values.omenative.webhook -}}
{{- if $wh.certManager.enabled -}}
omenative-webhook-cert
{{- else if $wh.secretName -}}
{{- $wh.secretName -}}
{{- else -}}
omenative-webhook-cert
{{- end -}}
{{- end -}}

{{/*
True when the chart makes the webhook's certificate itself: the webhook is on, without
cert-manager and without a Secret of the user's.
*/}}
{{- define "omenative.chartMadeCert" -}}
{{- $wh := .Values.omenative.webhook -}}
{{- if and $wh.enabled (not $wh.certManager.enabled) (not $wh.secretName) -}}true{{- end -}}
{{- end -}}

{{/*
The chart-made webhook certificate as JSON {ca, crt, key, bundle}: a CA and a serving
certificate for omenative-webhook.ome.svc (genCA/genSignedCert, 365 days), new at every
install and upgrade. Made once per render and kept in .Values._omenativeWebhookCert, so the
Secret (webhook.yaml) and the Deployment's checksum annotation see the same one. `bundle`
(the ValidatingWebhookConfiguration's caBundle) also trusts the CA of the Secret in the
cluster (lookup), so the old pods keep being called while the new ones roll out.
*/}}
{{- define "omenative.selfSignedCert" -}}
{{- if not (hasKey .Values "_omenativeWebhookCert") -}}
{{- $ca := genCA "omenative-webhook-ca" 365 -}}
{{- $dns := list "omenative-webhook" "omenative-webhook.ome" "omenative-webhook.ome.svc" "omenative-webhook.ome.svc.cluster.local" -}}
{{- $cert := genSignedCert "omenative-webhook.ome.svc" nil $dns 365 $ca -}}
{{- $bundle := $ca.Cert -}}
{{- $old := lookup "v1" "Secret" "ome" "omenative-webhook-cert" -}}
{{- if and $old $old.data (hasKey $old.data "ca.crt") -}}
{{- $bundle = printf "%s\n%s" (trim $ca.Cert) (index $old.data "ca.crt" | b64dec | trim) -}}
{{- end -}}
{{- $_ := set .Values "_omenativeWebhookCert" (dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key "bundle" $bundle) -}}
{{- end -}}
{{- toJson (get .Values "_omenativeWebhookCert") -}}
{{- end -}}
