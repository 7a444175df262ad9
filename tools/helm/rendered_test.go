// Package helm_test validates the manifests `make helm-check` rendered from
// deploy/helm/corral with each values file of deploy/helm/examples (in
// CORRAL_HELM_RENDERED). kubectl's client-side dry run needs a cluster to
// discover kinds, so the manifests are checked here instead: each object
// decodes strictly (no unknown field) into its Kubernetes API type, and the
// chart's promises hold: probes on /readyz and /healthz, secrets only from
// Secret objects and never in arguments, a preStop pause and a grace period
// covering the drain, selectors that select, edges listing every core.
package helm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func TestRenderedManifests(t *testing.T) {
	dir := os.Getenv("CORRAL_HELM_RENDERED")
	if dir == "" {
		t.Skip("CORRAL_HELM_RENDERED is not set: run `make helm-check`")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rendered manifests in %s (%v)", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkManifests(t, b)
		})
	}
}

// rendered is one release's objects, by kind.
type rendered struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	configMaps   []*corev1.ConfigMap
	monitors     []map[string]any
}

func checkManifests(t *testing.T, manifest []byte) {
	var r rendered
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifest), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if string(j) == "null" {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		json.Unmarshal(j, &meta)
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			r.deployments = append(r.deployments, strict[appsv1.Deployment](t, j))
		case "apps/v1 StatefulSet":
			r.statefulSets = append(r.statefulSets, strict[appsv1.StatefulSet](t, j))
		case "v1 Service":
			r.services = append(r.services, strict[corev1.Service](t, j))
		case "v1 ConfigMap":
			r.configMaps = append(r.configMaps, strict[corev1.ConfigMap](t, j))
		case "policy/v1 PodDisruptionBudget":
			r.pdbs = append(r.pdbs, strict[policyv1.PodDisruptionBudget](t, j))
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.monitors = append(r.monitors, *strict[map[string]any](t, j))
		default:
			t.Errorf("document %d: unexpected kind %s %s", i, meta.APIVersion, meta.Kind)
		}
	}
	if len(r.deployments) == 0 {
		t.Fatal("no Deployment rendered")
	}

	pods := map[string]*corev1.PodTemplateSpec{} // by workload name
	for _, d := range r.deployments {
		checkSelector(t, d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
			t.Errorf("%s: a rolling update must not take a pod down before its replacement is ready (maxUnavailable 0)", d.Name)
		}
		pods[d.Name] = &d.Spec.Template
	}
	for _, s := range r.statefulSets {
		checkSelector(t, s.Name, s.Spec.Selector.MatchLabels, s.Spec.Template.Labels)
		pods[s.Name] = &s.Spec.Template
		if !slices.ContainsFunc(r.services, func(svc *corev1.Service) bool {
			return svc.Name == s.Spec.ServiceName && svc.Spec.ClusterIP == corev1.ClusterIPNone
		}) {
			t.Errorf("%s: no headless Service %q for its pods' names", s.Name, s.Spec.ServiceName)
		}
	}
	for name, p := range pods {
		checkPod(t, name, p, r)
	}
	for _, svc := range r.services {
		if !selectsAny(svc.Spec.Selector, pods) {
			t.Errorf("Service %s selects no pod: %v", svc.Name, svc.Spec.Selector)
		}
	}
	if len(r.pdbs) == 0 {
		t.Error("no PodDisruptionBudget")
	}
	for _, pdb := range r.pdbs {
		if !selectsAny(pdb.Spec.Selector.MatchLabels, pods) {
			t.Errorf("PodDisruptionBudget %s selects no pod", pdb.Name)
		}
	}
	for _, m := range r.monitors {
		checkMonitor(t, m, r, pods)
	}
	checkInternalPorts(t, r, pods)
}

// checkMonitor: the ServiceMonitor scrapes /metrics on Services whose
// port serves it (an internal port, or a core's or a lone serve pod's
// only one), never the edges' public Service, and it scrapes every
// component.
func checkMonitor(t *testing.T, m map[string]any, r rendered, pods map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	spec, _ := m["spec"].(map[string]any)
	eps, _ := spec["endpoints"].([]any)
	if len(eps) == 0 || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("ServiceMonitor: want an endpoint on /metrics, got %v", spec)
		return
	}
	sel := map[string]string{}
	if s, ok := spec["selector"].(map[string]any)["matchLabels"].(map[string]any); ok {
		for k, v := range s {
			sel[k] = fmt.Sprint(v)
		}
	}
	scraped := map[string]bool{} // components
	for _, svc := range r.services {
		if !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
			continue
		}
		comp := svc.Spec.Selector["app.kubernetes.io/component"]
		scraped[comp] = true
		if comp == "edge" && !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "internal" }) {
			t.Errorf("ServiceMonitor scrapes Service %s, an edge Service without the internal port: edges serve /metrics only there", svc.Name)
		}
	}
	for _, p := range pods {
		if c := p.Labels["app.kubernetes.io/component"]; !scraped[c] {
			t.Errorf("ServiceMonitor scrapes no Service of the %s pods", c)
		}
	}
}

// checkInternalPorts: every edge serves /metrics and /admin on an internal
// port (CORRAL_INTERNAL_ADDR) that a ClusterIP Service exposes and that no
// other Service (the public one, a LoadBalancer) exposes.
func checkInternalPorts(t *testing.T, r rendered, pods map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	for name, p := range pods {
		if p.Labels["app.kubernetes.io/component"] != "edge" {
			continue
		}
		c := p.Spec.Containers[0]
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "internal" })
		if i < 0 {
			t.Errorf("%s: an edge without an internal port: its /metrics would be on the public one", name)
			continue
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "CORRAL_INTERNAL_ADDR" && strings.HasSuffix(e.Value, fmt.Sprintf(":%d", c.Ports[i].ContainerPort))
		}) {
			t.Errorf("%s: CORRAL_INTERNAL_ADDR does not listen on the internal port %d", name, c.Ports[i].ContainerPort)
		}
		internal := false
		for _, svc := range r.services {
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
				continue
			}
			for _, sp := range svc.Spec.Ports {
				if sp.TargetPort.String() != "internal" && sp.TargetPort.IntValue() != int(c.Ports[i].ContainerPort) {
					continue
				}
				if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
					t.Errorf("Service %s (%s) exposes the edges' internal port", svc.Name, svc.Spec.Type)
				}
				internal = true
			}
		}
		if !internal {
			t.Errorf("%s: no Service exposes the edges' internal port", name)
		}
	}
}

// strict decodes an object, refusing fields its API type does not have (a
// misspelt or misplaced field would otherwise be dropped by the API server).
func strict[T any](t *testing.T, j []byte) *T {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	v := new(T)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", firstLine(j), err)
	}
	return v
}

func firstLine(j []byte) string {
	var m struct {
		Kind     string
		Metadata struct{ Name string }
	}
	json.Unmarshal(j, &m)
	return m.Kind + " " + m.Metadata.Name
}

func checkSelector(t *testing.T, name string, sel, podLabels map[string]string) {
	t.Helper()
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
		t.Errorf("%s: selector %v does not select its own pods %v", name, sel, podLabels)
	}
}

func selectsAny(sel map[string]string, pods map[string]*corev1.PodTemplateSpec) bool {
	for _, p := range pods {
		if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

// secretEnv are the variables that carry secrets: only from Secret objects.
var secretEnv = []string{"CORRAL_JWT_SECRET", "CORRAL_API_KEY", "CORRAL_API_KEYS"}

func checkPod(t *testing.T, name string, p *corev1.PodTemplateSpec, r rendered) {
	t.Helper()
	if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: pods must run as non-root", name)
	}
	for _, c := range p.Spec.Containers {
		where := name + "/" + c.Name
		if len(c.Args) != 1 || !slices.Contains([]string{"serve", "edge", "core"}, c.Args[0]) {
			t.Errorf("%s: args %q: want only the command; settings go in the environment, secrets in Secret objects", where, c.Args)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			if _, dup := env[e.Name]; dup {
				t.Errorf("%s: %s set twice", where, e.Name)
			}
			env[e.Name] = e
		}
		for _, n := range secretEnv {
			if e, ok := env[n]; ok && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s: %s must come from a Secret", where, n)
			}
		}
		if e, ok := env["CORRAL_REDIS"]; ok && e.ValueFrom == nil {
			if u, err := url.Parse(e.Value); err != nil || u.User != nil {
				t.Errorf("%s: CORRAL_REDIS holds a password (or is not a URL): put it in a Secret (redis.secretName)", where)
			}
		}
		for _, m := range c.VolumeMounts {
			if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == m.Name && (v.Secret != nil || v.ConfigMap != nil)
			}) {
				t.Errorf("%s: mount %s has no Secret or ConfigMap volume", where, m.Name)
			}
		}
		checkConfig(t, where, p, c, env, r)
		for _, f := range []string{"CORRAL_JWT_PUBLIC_KEYS", "CORRAL_API_KEYS_FILE"} {
			if e, ok := env[f]; ok && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return strings.HasPrefix(e.Value, m.MountPath+"/")
			}) {
				t.Errorf("%s: %s=%s is not in a mounted Secret", where, f, e.Value)
			}
		}
		checkProbe(t, where, "readiness", c.ReadinessProbe, "/readyz")
		checkProbe(t, where, "liveness", c.LivenessProbe, "/healthz")
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no CPU and memory requests", where)
		}
		if c.Args[0] == "serve" || c.Args[0] == "edge" {
			checkDrain(t, where, p, c, env)
		}
		if c.Args[0] == "edge" {
			checkCores(t, where, env["CORRAL_CORE"].Value, r)
		}
	}
}

// checkConfig: with a config file, every pod reads it from the chart's
// ConfigMap (CORRAL_CONFIG names a file of a mounted ConfigMap volume) and
// carries its checksum, so that a change of the file rolls the pods.
func checkConfig(t *testing.T, where string, p *corev1.PodTemplateSpec, c corev1.Container, env map[string]corev1.EnvVar, r rendered) {
	t.Helper()
	if len(r.configMaps) == 0 {
		if _, ok := env["CORRAL_CONFIG"]; ok {
			t.Errorf("%s: CORRAL_CONFIG without a ConfigMap", where)
		}
		return
	}
	cm := r.configMaps[0]
	file, ok := env["CORRAL_CONFIG"]
	if !ok {
		t.Errorf("%s: the chart ships a config file (ConfigMap %s) the pod does not read (no CORRAL_CONFIG)", where, cm.Name)
		return
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		dir, key, _ := strings.Cut(strings.TrimPrefix(file.Value, m.MountPath+"/"), "/")
		if !strings.HasPrefix(file.Value, m.MountPath+"/") || key != "" {
			continue
		}
		mounted = slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
		}) && cm.Data[dir] != ""
	}
	if !mounted {
		t.Errorf("%s: CORRAL_CONFIG=%s is not a key of ConfigMap %s mounted in the pod", where, file.Value, cm.Name)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(cm.Data["corral.yaml"])))
	if got := p.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: annotation checksum/config %q is not the config file's sha256 %x: a change of the file would not roll the pod", where, got, sum)
	}
}

func checkProbe(t *testing.T, where, kind string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
		t.Errorf("%s: want a %s probe on GET %s, got %+v", where, kind, path, p)
	}
}

// checkDrain: the kubelet's grace period covers the preStop pause, the
// drain window and corral's own shutdown timeout, which covers the window.
func checkDrain(t *testing.T, where string, p *corev1.PodTemplateSpec, c corev1.Container, env map[string]corev1.EnvVar) {
	t.Helper()
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("%s: want a preStop pause before the drain", where)
		return
	}
	pause := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	window, err1 := time.ParseDuration(env["CORRAL_DRAIN_WINDOW"].Value)
	shutdown, err2 := time.ParseDuration(env["CORRAL_SHUTDOWN_TIMEOUT"].Value)
	if err1 != nil || err2 != nil || p.Spec.TerminationGracePeriodSeconds == nil {
		t.Errorf("%s: want CORRAL_DRAIN_WINDOW, CORRAL_SHUTDOWN_TIMEOUT and terminationGracePeriodSeconds", where)
		return
	}
	grace := time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	// corral's listeners get 2s after the clients have gone (server.Close).
	if shutdown < window+2*time.Second || pause+shutdown >= grace {
		t.Errorf("%s: pause %v + drain window %v (shutdown timeout %v, +2s) must fit the grace period %v", where, pause, window, shutdown, grace)
	}
}

// checkCores: an edge lists every core by its stable name, on the core's
// port, through the headless Service.
func checkCores(t *testing.T, where, cores string, r rendered) {
	t.Helper()
	if len(r.statefulSets) != 1 {
		t.Errorf("%s: want one core StatefulSet, got %d", where, len(r.statefulSets))
		return
	}
	s := r.statefulSets[0]
	var want []string
	for i := range int(*s.Spec.Replicas) {
		want = append(want, fmt.Sprintf("http://%s-%d.%s.", s.Name, i, s.Spec.ServiceName))
	}
	got := strings.Split(cores, ",")
	if len(got) != len(want) {
		t.Errorf("%s: CORRAL_CORE %q: want %d cores", where, cores, len(want))
		return
	}
	port := s.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) || !strings.HasSuffix(got[i], fmt.Sprintf(".svc:%d", port)) {
			t.Errorf("%s: core %d is %q, want %s….svc:%d", where, i, got[i], want[i], port)
		}
	}
}
