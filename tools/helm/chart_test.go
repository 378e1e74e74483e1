// Package helm_test checks charts/hookinbox's invariants on the objects Helm
// renders, for the default values and every value set under
// charts/hookinbox/ci (each optional feature on). It renders through Helm's
// own Go module, the way `helm template` does, and decodes each object
// strictly into its Kubernetes type, so a misspelt field fails too.
//
// Run by scripts/chart-test.sh (make chart-test): cd tools/helm && go test ./...
package helm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../charts/hookinbox"

// rendered is one rendering of the chart: its objects by kind, and the
// migration hook.
type rendered struct {
	name        string
	all         []*unstructured.Unstructured
	deployments map[string]*appsv1.Deployment // by component
	configMap   *corev1.ConfigMap
	config      map[string]any // the ConfigMap's hookinbox.yaml
	jobs        []*batchv1.Job
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	kinds       map[string]int
}

// render renders the chart with the values files and the extra values
// (dotted keys, as --set), validating them against values.schema.json
// unless skipSchema.
func render(t *testing.T, files []string, set map[string]any, skipSchema bool) (*rendered, error) {
	t.Helper()
	chrt, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		vals = chartutil.CoalesceTables(v, vals)
	}
	for key, value := range set {
		m := vals
		path := strings.Split(key, ".")
		for _, p := range path[:len(path)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[path[len(path)-1]] = value
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "hi", "hooks"
	install.SkipSchemaValidation = skipSchema
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, err
	}
	r := &rendered{name: strings.Join(files, ","), deployments: map[string]*appsv1.Deployment{}, kinds: map[string]int{}}
	manifests := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	for _, doc := range splitDocs(strings.Join(manifests, "\n---\n")) {
		r.add(t, doc)
	}
	return r, nil
}

func splitDocs(s string) []string {
	var docs []string
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(s, -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) != "" {
			docs = append(docs, doc)
		}
	}
	return docs
}

// add decodes one object, strictly into its type where the test has one.
func (r *rendered) add(t *testing.T, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("%s: not YAML: %v\n%s", r.name, err, doc)
	}
	r.all = append(r.all, u)
	r.kinds[u.GetKind()]++
	strict := func(into any) {
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %s %s: %v", r.name, u.GetKind(), u.GetName(), err)
		}
	}
	switch u.GetKind() {
	case "Deployment":
		d := &appsv1.Deployment{}
		strict(d)
		r.deployments[d.Labels["app.kubernetes.io/component"]] = d
	case "ConfigMap":
		r.configMap = &corev1.ConfigMap{}
		strict(r.configMap)
		if err := yaml.Unmarshal([]byte(r.configMap.Data["hookinbox.yaml"]), &r.config); err != nil {
			t.Fatalf("%s: hookinbox.yaml: %v", r.name, err)
		}
	case "Job":
		j := &batchv1.Job{}
		strict(j)
		r.jobs = append(r.jobs, j)
	case "HorizontalPodAutoscaler":
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		strict(h)
		r.hpas = append(r.hpas, h)
	case "Service":
		strict(&corev1.Service{})
	case "ServiceAccount":
		strict(&corev1.ServiceAccount{})
	}
}

// valueSets are the chart's ci/ value files, each rendered on its own.
func valueSets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("charts/hookinbox/ci: want the default and the optional value sets, found %v (%v)", files, err)
	}
	return files
}

func mustRender(t *testing.T, files []string, set map[string]any) *rendered {
	t.Helper()
	r, err := render(t, files, set, false)
	if err != nil {
		t.Fatalf("render %v %v: %v", files, set, err)
	}
	return r
}

func TestEveryValueSet(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			r := mustRender(t, []string{file}, nil)
			t.Run("LabelsOnEveryObject", func(t *testing.T) { checkLabels(t, r) })
			t.Run("PodsAreLockedDown", func(t *testing.T) { checkPods(t, r) })
			t.Run("ProbesOnHealthzAndReadyz", func(t *testing.T) { checkProbes(t, r) })
			t.Run("MigrationIsAPreInstallPreUpgradeHook", func(t *testing.T) { checkMigration(t, r, file) })
			t.Run("GracePeriodsExceedTheStopTimeouts", func(t *testing.T) { checkGrace(t, r) })
			t.Run("ReceiverLeavesTheServiceOnlyWhenItStops", func(t *testing.T) { checkReceiverReadiness(t, r) })
			t.Run("NoSecretInAnyConfigMap", func(t *testing.T) { checkNoSecret(t, r) })
			t.Run("AtMostOneWorkerAutoscaler", func(t *testing.T) { checkAutoscaling(t, r) })
			t.Run("ConfigChecksumOnThePods", func(t *testing.T) { checkChecksum(t, r) })
			t.Run("IngressIsATrustedProxyThatTakesEveryBody", func(t *testing.T) { checkIngress(t, r) })
			t.Run("EachComponentGetsOnlyItsSecrets", func(t *testing.T) { checkSecretEnv(t, r) })
			t.Run("GOMEMLIMITFromTheMemoryLimit", func(t *testing.T) { checkGOMEMLIMIT(t, r) })
			t.Run("MetricsOnTheOpsPortOnly", func(t *testing.T) { checkOpsPort(t, r) })
		})
	}
}

func checkLabels(t *testing.T, r *rendered) {
	for _, u := range r.all {
		for _, key := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"} {
			if u.GetLabels()[key] == "" {
				t.Errorf("%s %s has no label %s", u.GetKind(), u.GetName(), key)
			}
		}
	}
}

// podSpecs are the receiver's, the worker's and the migration Job's.
func podSpecs(r *rendered) map[string]*corev1.PodSpec {
	specs := map[string]*corev1.PodSpec{}
	for component, d := range r.deployments {
		specs[component] = &d.Spec.Template.Spec
	}
	for _, j := range r.jobs {
		specs[j.Name] = &j.Spec.Template.Spec
	}
	return specs
}

func checkPods(t *testing.T, r *rendered) {
	if len(r.deployments) != 2 || r.deployments["receiver"] == nil || r.deployments["worker"] == nil {
		t.Fatalf("want a receiver and a worker Deployment, got %v", r.kinds)
	}
	for name, spec := range podSpecs(r) {
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("%s: the pod must run as a numeric non-root user: %+v", name, psc)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: the pod's seccompProfile must be RuntimeDefault", name)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the service-account token must not be mounted", name)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s/%s: no securityContext", name, c.Name)
				continue
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: the root filesystem must be read-only", name, c.Name)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: privilege escalation must be off", name, c.Name)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s/%s: every capability must be dropped", name, c.Name)
			case sc.RunAsUser != nil && *sc.RunAsUser == 0:
				t.Errorf("%s/%s: runs as root", name, c.Name)
			}
		}
	}
}

// probePort is the container port each component's probes use: the
// receiver's ops port (receiver.ops_listen), so that its webhook port can be
// public, and the worker's only port.
var probePort = map[string]string{"receiver": "ops", "worker": "http"}

func checkProbes(t *testing.T, r *rendered) {
	for component, d := range r.deployments {
		c := d.Spec.Template.Spec.Containers[0]
		for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != probePort[component] {
				t.Errorf("%s: want a probe on GET %s at the %s port, got %+v", component, path, probePort[component], probe)
			}
		}
		if component == "receiver" {
			ops := fmt.Sprintf(":%d", containerPort(c, "ops"))
			if got := r.config["receiver"].(map[string]any)["ops_listen"]; got != ops {
				t.Errorf("receiver: ops_listen is %v, but its ops container port is %s", got, ops)
			}
		}
		want := []string{"/" + component, "--config", "/etc/hookinbox/hookinbox.yaml"}
		if !slices.Equal(c.Command, want) {
			t.Errorf("%s: command %q, want %q", component, c.Command, want)
		}
		port := fmt.Sprintf(":%d", c.Ports[0].ContainerPort)
		if got := r.config[component].(map[string]any)["listen"]; got != port {
			t.Errorf("%s: listens on %v, but its container port is %s", component, got, port)
		}
	}
}

// containerPort is c's port named name, 0 when it has none.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func checkMigration(t *testing.T, r *rendered, file string) {
	if migrationOff(file) {
		if len(r.jobs) != 0 {
			t.Errorf("migration.enabled is false, yet a Job is rendered")
		}
		return
	}
	if len(r.jobs) != 1 {
		t.Fatalf("want one migration Job, got %d", len(r.jobs))
	}
	j := r.jobs[0]
	events := strings.Split(j.Annotations["helm.sh/hook"], ",")
	if !slices.Contains(events, "pre-install") || !slices.Contains(events, "pre-upgrade") {
		t.Errorf("the migration Job's helm.sh/hook is %q, want pre-install,pre-upgrade", j.Annotations["helm.sh/hook"])
	}
	if !strings.Contains(j.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
		t.Errorf("the migration Job must be replaced on the next upgrade (before-hook-creation)")
	}
	c := j.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/inboxctl", "migrate"}) {
		t.Errorf("the migration runs %q", c.Command)
	}
	// A hook runs before the release's other objects exist: it may use
	// neither the ConfigMap nor the chart's ServiceAccount.
	if len(j.Spec.Template.Spec.Volumes) > 0 {
		t.Errorf("the migration Job mounts %v, which may not exist yet", j.Spec.Template.Spec.Volumes)
	}
	// The database section applies to the migration as to the daemons
	// (pooler and query_mode above all), through HOOKINBOX_DATABASE_*.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	db, _ := r.config["database"].(map[string]any)
	for key, value := range db {
		if key == "url" {
			continue
		}
		if got, ok := env["HOOKINBOX_DATABASE_"+strings.ToUpper(key)]; !ok || got != fmt.Sprint(value) {
			t.Errorf("the migration Job does not get database.%s = %v (HOOKINBOX_DATABASE_%s is %q)", key, value, strings.ToUpper(key), got)
		}
	}
	for _, e := range c.Env {
		if e.Name == "HOOKINBOX_DATABASE_URL" {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("the migration's database URL must come from the existing Secret")
			}
			return
		}
	}
	t.Errorf("the migration Job has no HOOKINBOX_DATABASE_URL")
}

// migrationOff reports whether the value file turns the migration hook off.
func migrationOff(file string) bool {
	data, _ := os.ReadFile(file)
	var v struct {
		Migration struct {
			Enabled *bool `json:"enabled"`
		} `json:"migration"`
	}
	_ = yaml.Unmarshal(data, &v)
	return v.Migration.Enabled != nil && !*v.Migration.Enabled
}

// seconds reads a duration key of the rendered config.
func seconds(t *testing.T, r *rendered, section, key string) int64 {
	t.Helper()
	s, _ := r.config[section].(map[string]any)[key].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("config %s.%s = %q: %v", section, key, s, err)
	}
	return int64(d / time.Second)
}

func checkGrace(t *testing.T, r *rendered) {
	for component, keys := range map[string][2]string{"worker": {"soft_stop_timeout", "hard_stop_timeout"}, "receiver": {"shutdown_delay", "shutdown_timeout"}} {
		stop := seconds(t, r, component, keys[0]) + seconds(t, r, component, keys[1])
		grace := r.deployments[component].Spec.Template.Spec.TerminationGracePeriodSeconds
		if grace == nil || *grace <= stop {
			t.Errorf("%s: terminationGracePeriodSeconds %v must exceed %s + %s (%ds)", component, grace, keys[0], keys[1], stop)
		}
	}
	if soft := seconds(t, r, "worker", "soft_stop_timeout"); *r.deployments["worker"].Spec.Template.Spec.TerminationGracePeriodSeconds <= soft {
		t.Errorf("worker: grace period within the soft-stop timeout (%ds)", soft)
	}
}

// checkReceiverReadiness checks the receiver's readiness probe against
// what its /readyz means (503 before the database was first reached and
// once stopping, never for a database that went away): one slow answer
// does not take a serving receiver out of its Service, and a stopping one
// is out within receiver.shutdown_delay, while it still listens.
func checkReceiverReadiness(t *testing.T, r *rendered) {
	p := r.deployments["receiver"].Spec.Template.Spec.Containers[0].ReadinessProbe
	if p == nil {
		t.Fatal("receiver: no readiness probe")
	}
	if p.FailureThreshold < 2 {
		t.Errorf("receiver: readinessProbe.failureThreshold %d: one slow answer would take a serving receiver out of its Service", p.FailureThreshold)
	}
	delay := seconds(t, r, "receiver", "shutdown_delay")
	if out := int64(p.PeriodSeconds * p.FailureThreshold); delay > 0 && out > delay {
		t.Errorf("receiver: readinessProbe takes %ds (periodSeconds x failureThreshold) to see a stopping receiver, more than receiver.shutdown_delay (%ds)", out, delay)
	}
}

var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// checkNoSecret requires every secret-bearing key of the ConfigMap (a
// source's secrets, api keys and Basic Auth passwords, River UI's
// passwords, the database URL) to be a ${NAME} reference, and the chart to
// render no Secret of its own.
func checkNoSecret(t *testing.T, r *rendered) {
	if r.configMap == nil {
		t.Fatal("no ConfigMap rendered")
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			if regexp.MustCompile(`(secrets\[\d+\]|password|api_keys\[\d+\]|database\.url)$`).MatchString(path) && !envRef.MatchString(v) {
				t.Errorf("ConfigMap key %s holds a value, not a ${NAME} reference", path)
			}
		}
	}
	walk("", r.config)
	// The Secret is never rendered: it must exist already.
	if r.kinds["Secret"] != 0 {
		t.Errorf("the chart renders a Secret; it must only reference existingSecret")
	}
}

func checkAutoscaling(t *testing.T, r *rendered) {
	hpa, keda := r.kinds["HorizontalPodAutoscaler"], r.kinds["ScaledObject"]
	if hpa > 0 && keda > 0 {
		t.Fatalf("both an HPA and a KEDA ScaledObject are rendered")
	}
	replicas := r.deployments["worker"].Spec.Replicas
	if hpa+keda > 0 && replicas != nil {
		t.Errorf("the worker Deployment sets replicas (%d) under an autoscaler: each upgrade would reset them", *replicas)
	}
	if hpa+keda == 0 && replicas == nil {
		t.Errorf("the worker Deployment has no replicas without an autoscaler")
	}
	for _, h := range r.hpas {
		if h.Spec.ScaleTargetRef.Name != r.deployments["worker"].Name {
			t.Errorf("the HPA scales %s, not the worker", h.Spec.ScaleTargetRef.Name)
		}
	}
	for _, u := range r.all {
		if u.GetKind() != "ScaledObject" {
			continue
		}
		trigger, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers")
		meta, _, _ := unstructured.NestedStringMap(trigger[0].(map[string]any), "metadata")
		if trigger[0].(map[string]any)["type"] != "postgresql" || meta["targetQueryValue"] == "" || meta["activationTargetQueryValue"] == "" || meta["query"] == "" {
			t.Errorf("the ScaledObject's trigger must be postgresql with a query, targetQueryValue and activationTargetQueryValue: %v", trigger)
		}
		_, auth := trigger[0].(map[string]any)["authenticationRef"]
		if (meta["connectionFromEnv"] == "") == !auth {
			t.Errorf("the trigger must take its connection from exactly one of connectionFromEnv and a TriggerAuthentication: %v", trigger)
		}
		if env := meta["connectionFromEnv"]; env != "" && !containerHasEnv(r.deployments["worker"], env) {
			t.Errorf("connectionFromEnv names %s, which the worker container does not have", env)
		}
		if auth && r.kinds["TriggerAuthentication"] != 1 {
			t.Errorf("authenticationRef without a TriggerAuthentication")
		}
		// The query internal/metrics' TestKEDAQueryCountsOnlyClaimableWork
		// runs against PostgreSQL.
		if want := kedaQuery(t); meta["query"] != want {
			t.Errorf("the trigger's query is %q, not the chart's files/keda-backlog.sql %q", meta["query"], want)
		}
	}
}

func containerHasEnv(d *appsv1.Deployment, name string) bool {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func checkChecksum(t *testing.T, r *rendered) {
	for component, d := range r.deployments {
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(d.Spec.Template.Annotations["checksum/config"]) {
			t.Errorf("%s: no checksum/config annotation on the pod template", component)
		}
		mounted := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			mounted = mounted || (v.ConfigMap != nil && v.ConfigMap.Name == r.configMap.Name)
		}
		if !mounted {
			t.Errorf("%s: the ConfigMap %s is not mounted", component, r.configMap.Name)
		}
	}
}

// presetBodyBytes are the presets' body limits (pkg/provider; its
// TestChartKnowsTheBodyPresets keeps the chart's copy in step).
var presetBodyBytes = map[string]int64{"github": 25 << 20}

// maxBodyBytes is the largest body limit of the rendered config's
// sources, as pkg/config derives it.
func maxBodyBytes(r *rendered) int64 {
	limit := func(v any) int64 {
		f, _ := v.(float64)
		return int64(f)
	}
	receiver, _ := r.config["receiver"].(map[string]any)
	def := max(limit(receiver["max_body_bytes"]), 0)
	if def == 0 {
		def = 1 << 20
	}
	var largest int64
	for _, s := range r.config["sources"].([]any) {
		src := s.(map[string]any)
		n := limit(src["max_body_bytes"])
		if n == 0 {
			n = presetBodyBytes[src["provider"].(string)]
		}
		if n == 0 {
			n = def
		}
		largest = max(largest, n)
	}
	return largest
}

// ingress returns the rendered Ingress, or nil.
func ingress(r *rendered) *unstructured.Unstructured {
	for _, u := range r.all {
		if u.GetKind() == "Ingress" {
			return u
		}
	}
	return nil
}

// proxyBodySize parses an nginx size ("25m", "1048576", "2g") into bytes.
func proxyBodySize(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^([0-9]+)([kKmMgG]?)$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("proxy-body-size %q is not an nginx size", s)
	}
	var n int64
	fmt.Sscan(m[1], &n)
	return n << map[string]int{"": 0, "k": 10, "m": 20, "g": 30}[strings.ToLower(m[2])]
}

// checkIngress: an Ingress sets receiver.trusted_proxies in the config, so
// that the per-client limits see each client's own address, and lets
// through (nginx's proxy-body-size) every body the receiver accepts.
func checkIngress(t *testing.T, r *rendered) {
	in := ingress(r)
	trusted, set := r.config["receiver"].(map[string]any)["trusted_proxies"]
	if in == nil {
		if set {
			t.Errorf("no Ingress, yet receiver.trusted_proxies is %v", trusted)
		}
		return
	}
	if list, _ := trusted.([]any); len(list) == 0 {
		t.Errorf("the Ingress is on, but receiver.trusted_proxies is %v: every delivery would count as the ingress pod's", trusted)
	}
	size := in.GetAnnotations()["nginx.ingress.kubernetes.io/proxy-body-size"]
	if got, want := proxyBodySize(t, size), maxBodyBytes(r); got < want {
		t.Errorf("proxy-body-size %s (%d bytes) is under the largest source body limit (%d bytes)", size, got, want)
	}
}

func TestIngressBehindAProxy(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	stripe := map[string]any{"name": "stripe", "provider": "stripe", "secrets": []any{"${S}"}}
	github := map[string]any{"name": "github", "provider": "github", "secrets": []any{"${G}"}}
	for name, tt := range map[string]struct {
		set          map[string]any
		bodySize     string
		trusted      []any
		notOnIngress bool
	}{
		"DefaultsTrustThePrivateRangesAndTakeAMiB": {
			set:      map[string]any{},
			bodySize: "1m",
			trusted:  []any{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fd00::/8"},
		},
		"GitHubsPresetTakes25MiB": {
			set:      map[string]any{"config.sources": []any{stripe, github}},
			bodySize: "25m",
		},
		"ASourcesOwnLimitWinsOverThePreset": {
			set:      map[string]any{"config.sources": []any{stripe, map[string]any{"name": "github", "provider": "github", "secrets": []any{"${G}"}, "max_body_bytes": 3_000_000}}},
			bodySize: "3m",
		},
		"TheReceiversDefaultLimitCounts": {
			set:      map[string]any{"config.receiver": map[string]any{"max_body_bytes": 5 << 20}},
			bodySize: "5m",
		},
		"AValueWins": {
			set:      map[string]any{"receiver.ingress.proxyBodySize": "64m"},
			bodySize: "64m",
		},
		"AnAnnotationWins": {
			set:      map[string]any{"receiver.ingress.annotations": map[string]any{"nginx.ingress.kubernetes.io/proxy-body-size": "100m"}},
			bodySize: "100m",
		},
		"TheConfigsTrustedProxiesWin": {
			set:     map[string]any{"config.receiver": map[string]any{"trusted_proxies": []any{"10.42.0.0/16"}}},
			trusted: []any{"10.42.0.0/16"},
		},
		"TrustedProxiesFromTheValues": {
			set:     map[string]any{"receiver.ingress.trustedProxies": []any{"10.244.0.0/16"}},
			trusted: []any{"10.244.0.0/16"},
		},
		"NoIngressNoTrustedProxies": {
			set:          map[string]any{"receiver.ingress.enabled": false},
			notOnIngress: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set := map[string]any{"receiver.ingress.enabled": true}
			for k, v := range tt.set {
				set[k] = v
			}
			r := mustRender(t, defaults, set)
			checkIngress(t, r)
			trusted, ok := r.config["receiver"].(map[string]any)["trusted_proxies"]
			if tt.notOnIngress {
				if ingress(r) != nil || ok {
					t.Errorf("ingress off: want no Ingress and no trusted_proxies, got %v", trusted)
				}
				return
			}
			if tt.trusted != nil && !slices.Equal(trusted.([]any), tt.trusted) {
				t.Errorf("trusted_proxies %v, want %v", trusted, tt.trusted)
			}
			if got := ingress(r).GetAnnotations()["nginx.ingress.kubernetes.io/proxy-body-size"]; tt.bodySize != "" && got != tt.bodySize {
				t.Errorf("proxy-body-size %q, want %q", got, tt.bodySize)
			}
		})
	}
}

func TestConfigChangeRollsThePods(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	before := mustRender(t, defaults, nil)
	after := mustRender(t, defaults, map[string]any{"config.log": map[string]any{"level": "debug"}})
	for _, component := range []string{"receiver", "worker"} {
		a := before.deployments[component].Spec.Template.Annotations["checksum/config"]
		b := after.deployments[component].Spec.Template.Annotations["checksum/config"]
		if a == b {
			t.Errorf("%s: the checksum did not change with the config", component)
		}
	}
}

func TestReceiverAndWorkerReplicasAreIndependent(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	for _, n := range [][2]int{{3, 7}, {5, 1}} {
		r := mustRender(t, defaults, map[string]any{"receiver.replicas": n[0], "worker.replicas": n[1]})
		if got := *r.deployments["receiver"].Spec.Replicas; int(got) != n[0] {
			t.Errorf("receiver.replicas %d rendered %d", n[0], got)
		}
		if got := *r.deployments["worker"].Spec.Replicas; int(got) != n[1] {
			t.Errorf("worker.replicas %d rendered %d", n[1], got)
		}
	}
}

func TestHPAAndKEDATogetherAreRefused(t *testing.T) {
	t.Parallel()
	both := []string{filepath.Join(chartDir, "testdata", "hpa-and-keda-values.yaml")}

	_, err := render(t, both, nil, false)
	if err == nil || !strings.Contains(err.Error(), "/worker/autoscaling") {
		t.Errorf("values.schema.json must refuse hpa and keda together, got %v", err)
	}
	// And the templates, for whoever skips the schema.
	_, err = render(t, both, nil, true)
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("the templates must refuse hpa and keda together, got %v", err)
	}
}

func TestBadValuesAreRefused(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	for name, tt := range map[string]struct {
		set  map[string]any
		want string
	}{
		"LiteralProviderSecret": {
			map[string]any{"config.sources": []any{map[string]any{"name": "stripe", "provider": "stripe", "secrets": []any{"whsec_literal"}}}},
			"config.sources[0].secrets[0] must be a ${NAME} reference",
		},
		"LiteralDatabaseURL": {
			map[string]any{"config.database": map[string]any{"url": "postgres://u:p@db/hookinbox"}},
			"config.database.url must not be written",
		},
		"ChartOwnedKey": {
			map[string]any{"config.worker": map[string]any{"soft_stop_timeout": "1h", "routes": []any{}}},
			"config.worker.soft_stop_timeout is set by the chart",
		},
		"WorkerGraceTooShort": {
			map[string]any{"worker.terminationGracePeriodSeconds": 25},
			"worker.terminationGracePeriodSeconds (25) must exceed",
		},
		"ReceiverGraceTooShort": {
			map[string]any{"receiver.terminationGracePeriodSeconds": 15},
			"receiver.terminationGracePeriodSeconds (15) must exceed",
		},
		"NoExistingSecret": {
			map[string]any{"existingSecret": ""},
			"existingSecret is required",
		},
		"UnknownValue": {
			map[string]any{"worker.replicaz": 3},
			"replicaz",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, defaults, tt.set, false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want an error containing %q, got %v", tt.want, err)
			}
		})
	}
}

// TestREADMEListsEveryValue keeps the chart's README table from drifting:
// every top-level value, and every value of receiver and worker, is named
// in it.
func TestREADMEListsEveryValue(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	for key, v := range values {
		if !strings.Contains(string(readme), "`"+key) {
			t.Errorf("charts/hookinbox/README.md does not list %s", key)
		}
		if key != "receiver" && key != "worker" {
			continue
		}
		for sub := range v.(map[string]any) {
			// A row names a value in full, or as `.sub` after its parent's.
			if !strings.Contains(string(readme), "`"+key+"."+sub) && !strings.Contains(string(readme), "`."+sub) {
				t.Errorf("charts/hookinbox/README.md does not list %s.%s", key, sub)
			}
		}
	}
}

// kedaQuery is the chart's KEDA trigger query.
func kedaQuery(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "keda-backlog.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

var refRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// refs returns the ${NAME} references in v.
func refs(v any) map[string]bool {
	data, _ := yaml.Marshal(v)
	names := map[string]bool{}
	for _, m := range refRE.FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	return names
}

// neededRefs are the references of the parts of the config a component
// needs (config.Needs): the receiver the sources less their reconcile
// keys, the worker the sources' reconcile keys; each its own section and
// tracing.
func neededRefs(r *rendered, component string) map[string]bool {
	parts := []any{r.config[component], r.config["tracing"]}
	sources, _ := r.config["sources"].([]any)
	for _, s := range sources {
		src := map[string]any{}
		for k, v := range s.(map[string]any) {
			src[k] = v
		}
		if component == "receiver" {
			delete(src, "reconcile")
			parts = append(parts, src)
		} else {
			parts = append(parts, src["reconcile"])
		}
	}
	return refs(parts)
}

// checkSecretEnv requires that no container takes the whole Secret
// (envFrom), that each daemon has a variable for every reference its part
// of the config makes, and no key of the Secret beyond those, the database
// URL and (the worker) River UI's; and that the migration Job gets the
// database URL alone.
func checkSecretEnv(t *testing.T, r *rendered) {
	for name, spec := range podSpecs(r) {
		c := spec.Containers[0]
		if len(c.EnvFrom) > 0 {
			t.Errorf("%s: envFrom %v hands the container every key", name, c.EnvFrom)
		}
		secretKeys := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Name != "HOOKINBOX_DATABASE_URL" {
				secretKeys[e.Name] = true
			}
		}
		want := map[string]bool{}
		switch name {
		case "receiver", "worker":
			want = neededRefs(r, name)
		}
		for ref := range want {
			if !secretKeys[ref] {
				t.Errorf("%s: the config references ${%s}, which the container does not get", name, ref)
			}
		}
		for key := range secretKeys {
			if !want[key] {
				t.Errorf("%s: gets %s from the Secret, which its part of the config does not use", name, key)
			}
		}
	}
	// The receiver never holds the worker's credentials, nor the worker
	// the signing secrets.
	recv, work := neededRefs(r, "receiver"), neededRefs(r, "worker")
	for _, key := range []string{"RIVERUI_PASSWORD", "HOOKINBOX_ADMIN_TOKEN"} {
		if recv[key] {
			t.Errorf("the receiver gets %s", key)
		}
	}
	for key := range refs(r.config["sources"]) {
		if work[key] && !refs(collectReconcile(r))[key] {
			t.Errorf("the worker gets the signing secret %s", key)
		}
	}
}

func collectReconcile(r *rendered) []any {
	var out []any
	sources, _ := r.config["sources"].([]any)
	for _, s := range sources {
		out = append(out, s.(map[string]any)["reconcile"])
	}
	return out
}

// checkGOMEMLIMIT requires GOMEMLIMIT at 90 % (goMemLimitPercent's default)
// of the memory limit, in MiB, on every container that has one.
func checkGOMEMLIMIT(t *testing.T, r *rendered) {
	for name, spec := range podSpecs(r) {
		c := spec.Containers[0]
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		got := ""
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				got = e.Value
			}
		}
		if !ok {
			if got != "" {
				t.Errorf("%s: GOMEMLIMIT %s without a memory limit", name, got)
			}
			continue
		}
		want := fmt.Sprintf("%dMiB", limit.Value()*90/100/(1<<20))
		if got != want {
			t.Errorf("%s: GOMEMLIMIT is %q, want %q (90 %% of %s)", name, got, want, limit.String())
		}
	}
}

// checkOpsPort requires the receiver's Service to expose the ops port, the
// ServiceMonitor to scrape the receiver there (not on the webhook port),
// and the NetworkPolicy to admit opsFrom, not the webhook's peers, to it.
func checkOpsPort(t *testing.T, r *rendered) {
	for _, u := range r.all {
		switch u.GetKind() {
		case "ServiceMonitor":
			component := u.GetLabels()["app.kubernetes.io/component"]
			endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
			if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != probePort[component] {
				t.Errorf("ServiceMonitor %s: want /metrics on the %s port, got %v", u.GetName(), probePort[component], endpoints)
			}
		case "Service":
			if u.GetLabels()["app.kubernetes.io/component"] != "receiver" {
				continue
			}
			ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
			names := map[any]bool{}
			for _, p := range ports {
				names[p.(map[string]any)["name"]] = true
			}
			if !names["http"] || !names["ops"] {
				t.Errorf("the receiver's Service must have the ports http and ops, has %v", ports)
			}
		case "NetworkPolicy":
			if u.GetLabels()["app.kubernetes.io/component"] != "receiver" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
			for _, rule := range rules {
				ports, _, _ := unstructured.NestedSlice(rule.(map[string]any), "ports")
				from, _, _ := unstructured.NestedSlice(rule.(map[string]any), "from")
				if len(ports) != 1 {
					t.Errorf("receiver NetworkPolicy: a rule for one port each, got %v", ports)
					continue
				}
				if ports[0].(map[string]any)["port"] == "ops" && len(from) == 0 {
					t.Errorf("receiver NetworkPolicy: the ops port (/metrics) is open to anyone")
				}
			}
		}
	}
}

func TestPrometheusRuleAlerts(t *testing.T) {
	t.Parallel()
	r := mustRender(t, []string{filepath.Join(chartDir, "ci", "all-on-keda-values.yaml")}, nil)
	exprs := map[string]string{}
	byName := map[string]map[string]any{}
	for _, u := range r.all {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, rule := range rules {
				m := rule.(map[string]any)
				exprs[fmt.Sprint(m["alert"])] = fmt.Sprint(m["expr"])
				byName[fmt.Sprint(m["alert"])] = m
			}
		}
	}
	// The primary alert: head-of-line age per source, over 5 minutes.
	if want := `max by (source) (hookinbox_inbox_oldest_pending_age_seconds{`; !strings.HasPrefix(exprs["HookinboxBacklogOld"], want) ||
		!strings.HasSuffix(exprs["HookinboxBacklogOld"], "}) > 300") {
		t.Errorf("HookinboxBacklogOld is not the per-source head-of-line age over 300s: %s", exprs["HookinboxBacklogOld"])
	}
	primary := byName["HookinboxBacklogOld"]
	labels, _ := primary["labels"].(map[string]any)
	annotations, _ := primary["annotations"].(map[string]any)
	if fmt.Sprint(primary["for"]) != "5m" || labels["severity"] != "critical" || annotations["runbook"] == nil {
		t.Errorf("HookinboxBacklogOld is not critical after 5m with a runbook: %v", primary)
	}
	for _, alert := range []string{"HookinboxOutboxDestinationDisabled", "HookinboxOutboxMessagesFailed", "HookinboxOutboxBacklogOld"} {
		if exprs[alert] == "" {
			t.Errorf("no alert %s", alert)
		}
	}
	// A ratio of 401s to all deliveries, per source: a low-volume source
	// whose rotation failed completely reads 1.
	burst := exprs["HookinboxUnauthorizedBurst"]
	if !regexp.MustCompile(`(?s)sum by \(source\) \(increase\(hookinbox_receiver_deliveries_total\{[^}]*reason="signature"\}\[1h\]\)\)\s*/ sum by \(source\) \(increase\(hookinbox_receiver_deliveries_total\{[^}]*\}\[1h\]\)\) > 0\.5`).MatchString(burst) {
		t.Errorf("HookinboxUnauthorizedBurst is not the ratio of 401s to all deliveries: %s", burst)
	}
}

func TestGOMEMLIMIT(t *testing.T) {
	t.Parallel()
	defaults := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
	for name, tt := range map[string]struct {
		set  map[string]any
		want string // the receiver's GOMEMLIMIT; "" for none
	}{
		"Gi":             {map[string]any{"receiver.resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}}}, "1843MiB"},
		"DecimalM":       {map[string]any{"receiver.resources": map[string]any{"limits": map[string]any{"memory": "1000M"}}}, "858MiB"},
		"Bytes":          {map[string]any{"receiver.resources": map[string]any{"limits": map[string]any{"memory": "536870912"}}}, "460MiB"},
		"NoLimitNoValue": {map[string]any{"receiver.resources": map[string]any{"limits": map[string]any{"memory": nil}}}, ""},
		"PercentZero":    {map[string]any{"goMemLimitPercent": 0}, ""},
		"Percent50":      {map[string]any{"goMemLimitPercent": 50}, "384MiB"},
		"ExtraEnvWins":   {map[string]any{"receiver.extraEnv": []any{map[string]any{"name": "GOMEMLIMIT", "value": "100MiB"}}}, "100MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := mustRender(t, defaults, tt.set)
			var got []string
			for _, e := range r.deployments["receiver"].Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					got = append(got, e.Value)
				}
			}
			if tt.want == "" && len(got) > 0 || tt.want != "" && !slices.Equal(got, []string{tt.want}) {
				t.Errorf("GOMEMLIMIT %v, want %q", got, tt.want)
			}
		})
	}
}

func TestSecretPerComponent(t *testing.T) {
	t.Parallel()
	all := []string{filepath.Join(chartDir, "ci", "all-on-keda-values.yaml")}
	own := map[string]string{"receiver": "hi-receiver", "worker": "hi-worker", "hi-hookinbox-migrate": "hi-migration"}
	r := mustRender(t, all, map[string]any{
		"receiver.existingSecret": own["receiver"], "worker.existingSecret": own["worker"], "migration.existingSecret": own["hi-hookinbox-migrate"],
	})
	for name, spec := range podSpecs(r) {
		refs := 0
		for _, e := range spec.Containers[0].Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			refs++
			if got := e.ValueFrom.SecretKeyRef.Name; got != own[name] {
				t.Errorf("%s: %s comes from the Secret %s, not its own %s", name, e.Name, got, own[name])
			}
		}
		if refs == 0 {
			t.Errorf("%s: no key from its Secret", name)
		}
	}
	for _, u := range r.all {
		if u.GetKind() == "TriggerAuthentication" {
			refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "secretTargetRef")
			if got := refs[0].(map[string]any)["name"]; got != own["worker"] {
				t.Errorf("KEDA reads the connection string from %v, not the worker's Secret", got)
			}
		}
	}
}

// TestHighAvailabilityValues renders every values block of
// docs/deploying.md's "High availability" section, and checks that the
// hookinbox.yaml it renders requires the durability the block asks for.
func TestHighAvailabilityValues(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin := strings.Index(doc, "\n## High availability\n")
	if begin < 0 {
		t.Fatal("docs/deploying.md has no High availability section")
	}
	section := doc[begin+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 3 {
		t.Fatalf("want a values block per kind of setup, found %d", len(blocks))
	}
	for i, block := range blocks {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			var values struct {
				Config struct {
					Database struct {
						Durability map[string]any `json:"durability"`
					} `json:"database"`
				} `json:"config"`
			}
			if err := yaml.Unmarshal([]byte(block[1]), &values); err != nil {
				t.Fatalf("block %d: %v\n%s", i, err, block[1])
			}
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(block[1]), 0o600); err != nil {
				t.Fatal(err)
			}
			r := mustRender(t, []string{file}, nil)
			db, _ := r.config["database"].(map[string]any)
			got, _ := db["durability"].(map[string]any)
			want := values.Config.Database.Durability
			if want["require"] == nil || fmt.Sprint(got["require"]) != fmt.Sprint(want["require"]) {
				t.Errorf("block %d: hookinbox.yaml's database.durability is %v, want %v", i, got, want)
			}
		})
	}
}
