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

{{/*
A Go duration ("15s", "1m30s", "500ms"; values.schema.json has checked its form) in
seconds, as a string for float64.
*/}}
{{- define "omenative.seconds" -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $total = addf $total (mulf (float64 $number) (index $units (trimPrefix $number .))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
Refuse leader-election timings the manager would refuse at start (leader.py, client-go's
rule): retryPeriod < renewDeadline < leaseDuration. A leader that could not renew for
renewDeadline stops acting, and that must happen before its Lease expires and a standby
takes it; it tries every retryPeriod, so it needs more than one try per deadline.
*/}}
{{- define "omenative.checkLeaderElection" -}}
{{- $le := .Values.ome.controller.leaderElection -}}
{{- $lease := include "omenative.seconds" $le.leaseDuration | float64 -}}
{{- $renew := include "omenative.seconds" $le.renewDeadline | float64 -}}
{{- $retry := include "omenative.seconds" $le.retryPeriod | float64 -}}
{{- if not (and (gt $retry 0.0) (lt $retry $renew) (lt $renew $lease)) -}}
{{- fail (printf "ome.controller.leaderElection: leaseDuration (%s) > renewDeadline (%s) > retryPeriod (%s) > 0 is required: a leader that cannot renew its Lease for renewDeadline steps down, which must happen before the Lease expires (leaseDuration) and a standby takes it, and it retries every retryPeriod (client-go's rule; the manager refuses other timings at start)" $le.leaseDuration $le.renewDeadline $le.retryPeriod) -}}
{{- end -}}
{{- end -}}
