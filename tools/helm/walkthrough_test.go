package helm_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const walkthroughMarker = "<!-- tested: TestDeploymentHelmWalkthrough -->"

// TestDeploymentHelmWalkthrough runs the command blocks of
// docs/DEPLOYMENT.md's "Kubernetes (Helm)" section marked with its name,
// as written, in a scratch folder and without a cluster: openssl runs as
// is; kubectl runs with --dry-run=client -o yaml appended (it prints the
// Secret it would create); helm install runs as helm template with the
// same arguments, after helm lint --strict. Then: every Secret and key the
// rendered pods read is one the commands created, the edges' key is one
// the cores accept, the public key parses, the config file passes `corral
// check-config`, and the manifests pass TestRenderedManifests' checks.
func TestDeploymentHelmWalkthrough(t *testing.T) {
	root := repoRoot(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is not installed: sudo apt-get install -y kubernetes-client (Debian's kubectl; the test runs `kubectl create secret ... --dry-run=client -o yaml`, no cluster)")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is not installed: sudo apt-get install -y openssl")
	}
	blocks := helmSectionBlocks(t, root)

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{out, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The doc's paths are the repository's: deploy/helm/...
	if err := os.Symlink(filepath.Join(root, "deploy"), filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	helm := fmt.Sprintf("go tool -modfile=%q helm", filepath.Join(root, "tools", "helm", "go.mod"))
	shim := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\nset -euo pipefail\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shim("kubectl", fmt.Sprintf(`case "$1 ${2:-}" in
"create secret") ;;
*) echo "the walkthrough test runs only 'kubectl create secret', not: kubectl $*" >&2; exit 2 ;;
esac
n=$(ls %[2]q | wc -l)
%[1]q "$@" --dry-run=client -o yaml > %[2]q/kubectl-$n.yaml
`, kubectl, out))
	shim("helm", fmt.Sprintf(`if [ "$1" != install ]; then
  echo "the walkthrough test runs only 'helm install', not: helm $*" >&2; exit 2
fi
shift
# lint takes the chart and the values, not the release name
args=("$@"); lint=()
for ((i=0; i<${#args[@]}; i++)); do
  if [ $i -eq 0 ]; then continue; fi
  lint+=("${args[$i]}")
done
# go tool needs the module's root; the doc's paths (deploy/helm/...) are
# the same there as in the scratch folder.
(cd %[2]q && %[1]s lint --strict --quiet "${lint[@]}") >&2
(cd %[2]q && %[1]s template "$@") > %[3]q/helm.yaml
`, helm, root, out))

	for i, b := range blocks {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("DEPLOYMENT.md, the walkthrough's block %d, as written: %v\n%s", i+1, err, o)
		}
	}

	secrets := map[string]map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(out, "kubectl-*.yaml"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		s := strict[corev1.Secret](t, j)
		secrets[s.Name] = s.Data
	}
	manifest, err := os.ReadFile(filepath.Join(out, "helm.yaml"))
	if err != nil {
		t.Fatalf("the walkthrough never ran helm install: %v", err)
	}
	checkManifests(t, manifest)
	checkSecretsExist(t, manifest, secrets)

	if k := secrets["corral-api-keys"]; k != nil {
		if !slices.Contains(strings.Fields(string(k["api-keys"])), string(k["edge-api-key"])) {
			t.Error("corral-api-keys: the edges' key (edge-api-key) is not one the cores accept (api-keys)")
		}
	}
	for name, data := range secrets {
		for key, v := range data {
			if !strings.HasSuffix(key, ".pem") {
				continue
			}
			blk, _ := pem.Decode(v)
			if blk == nil || blk.Type != "PUBLIC KEY" {
				t.Errorf("Secret %s key %s: not a PEM PUBLIC KEY", name, key)
				continue
			}
			if _, err := x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
				t.Errorf("Secret %s key %s: %v", name, key, err)
			}
		}
	}
	checkConfigFile(t, root, manifest)
}

// TestConfigChangeRollsPods: the pods' checksum/config annotation changes
// with the config file (so helm upgrade rolls the edges and the cores),
// and does not change when the file does not.
func TestConfigChangeRollsPods(t *testing.T) {
	root := repoRoot(t)
	render := func(set ...string) map[string]string {
		t.Helper()
		args := []string{"tool", "-modfile=" + filepath.Join(root, "tools", "helm", "go.mod"), "helm",
			"template", "corral", "deploy/helm/corral", "-f", "deploy/helm/examples/split.yaml"}
		for _, s := range set {
			args = append(args, "--set-string", s)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		o, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		sums := map[string]string{}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(o), -1) {
			j, _ := yaml.YAMLToJSON([]byte(doc))
			var meta struct {
				Kind     string
				Metadata struct{ Name string }
				Spec     struct {
					Template corev1.PodTemplateSpec
				}
			}
			json.Unmarshal(j, &meta)
			if meta.Kind == "Deployment" || meta.Kind == "StatefulSet" {
				sums[meta.Metadata.Name] = meta.Spec.Template.Annotations["checksum/config"]
			}
		}
		if len(sums) != 2 {
			t.Fatalf("want an edge Deployment and a core StatefulSet, got %v", sums)
		}
		return sums
	}
	a, again, b := render(), render(), render("config.version=changed")
	for name := range a {
		if a[name] == "" {
			t.Errorf("%s: no checksum/config annotation", name)
		}
		if again[name] != a[name] {
			t.Errorf("%s: the same file gave two checksums: a helm upgrade would roll the pods for nothing", name)
		}
		if b[name] == a[name] {
			t.Errorf("%s: the checksum did not change with the file: the pods would keep the old one", name)
		}
	}
}

// helmSectionBlocks returns the walkthrough's shell blocks: those of the
// Helm section marked as run by this test. Every shell block of the
// section is marked one way or the other (archcheck checks the marking).
func helmSectionBlocks(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "DEPLOYMENT.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Kubernetes (Helm)")
	if i < 0 {
		t.Fatal(`docs/DEPLOYMENT.md has no "## Kubernetes (Helm)"`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^"+regexp.QuoteMeta(walkthroughMarker)+"\n```(?:sh|bash|shell)\n(.*?)^```").FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("docs/DEPLOYMENT.md's Helm section has no block marked %s", walkthroughMarker)
	}
	return blocks
}

// checkSecretsExist: every Secret (and key) the rendered pods read, as
// variables or volumes, is one the walkthrough created.
func checkSecretsExist(t *testing.T, manifest []byte, secrets map[string]map[string][]byte) {
	t.Helper()
	need := func(where, name, key string) {
		data, ok := secrets[name]
		switch {
		case !ok:
			t.Errorf("%s reads Secret %q, which the walkthrough never creates (it creates %v)", where, name, slices.Sorted(mapsKeys(secrets)))
		case len(data[key]) == 0:
			t.Errorf("%s reads key %q of Secret %q, which the walkthrough leaves empty or out", where, key, name)
		}
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifest), -1) {
		j, _ := yaml.YAMLToJSON([]byte(doc))
		var w struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct{ Template corev1.PodTemplateSpec }
		}
		json.Unmarshal(j, &w)
		if w.Kind != "Deployment" && w.Kind != "StatefulSet" {
			continue
		}
		p := w.Spec.Template.Spec
		for _, c := range p.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					need(w.Metadata.Name+" "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
		for _, v := range p.Volumes {
			if v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				need(w.Metadata.Name+" volume "+v.Name, v.Secret.SecretName, it.Key)
			}
		}
	}
}

// checkConfigFile runs `corral check-config` on the config file the
// chart renders, so the room classes a user deploys are the ones corral
// accepts.
func checkConfigFile(t *testing.T, root string, manifest []byte) {
	t.Helper()
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifest), -1) {
		j, _ := yaml.YAMLToJSON([]byte(doc))
		var cm corev1.ConfigMap
		if json.Unmarshal(j, &cm) != nil || cm.Kind != "ConfigMap" {
			continue
		}
		f := filepath.Join(t.TempDir(), "corral.yaml")
		if err := os.WriteFile(f, []byte(cm.Data["corral.yaml"]), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "run", "./cmd/corral", "check-config", f)
		cmd.Dir = root
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the chart's config file fails corral check-config: %v\n%s", err, o)
		} else {
			t.Logf("check-config: %s", strings.TrimSpace(string(o)))
		}
		return
	}
	t.Error("the walkthrough's release ships no config file (ConfigMap)")
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "docs", "DEPLOYMENT.md")); err != nil {
		t.Fatal(err)
	}
	return root
}
