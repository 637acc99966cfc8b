//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// helmBinary is the helm scripts/test.sh builds (scripts/helm.sh path).
var helmBinary = os.Getenv("JOBSCHED_TEST_HELM")

var chartDir = filepath.Join(repoRoot, "manifests", "chart")

func needHelm(t *testing.T) {
	t.Helper()
	if helmBinary == "" {
		t.Fatal("JOBSCHED_TEST_HELM must be set: run scripts/test.sh, which builds helm (scripts/helm.sh path)")
	}
}

// runHelm runs helm with the test cluster's kubeconfig and returns its stdout, and its stderr in the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	needHelm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBinary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// object is one rendered manifest.
type object = map[string]any

// decodeObjects splits a multi-document YAML stream into its objects (empty documents dropped).
func decodeObjects(t *testing.T, stream string) []object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var out []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		if o != nil {
			out = append(out, o)
		}
	}
}

// exampleArgs are the values the README's "Install with Helm" gives for the reports example: its two files.
func exampleArgs() []string {
	ex := filepath.Join(repoRoot, "manifests", "examples", "reports")
	return []string{"--set-file", "config=" + filepath.Join(ex, "jobsched.yaml"), "--set-file", "jobTemplate=" + filepath.Join(ex, "job.yaml")}
}

// helmTemplate is `helm template` of the chart.
func helmTemplate(t *testing.T, release, ns string, args ...string) []object {
	t.Helper()
	return decodeObjects(t, mustHelm(t, append([]string{"template", release, chartDir, "-n", ns}, args...)...))
}

func kindName(o object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	if ns != "" {
		return fmt.Sprintf("%s %s/%s", o["kind"], ns, name)
	}
	return fmt.Sprintf("%s %s", o["kind"], name)
}

func kindNames(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, kindName(o))
	}
	slices.Sort(out)
	return out
}

// find returns the one object of kind (and, if given, name), converted into out.
func find(t *testing.T, objs []object, kind, name string, out any) {
	t.Helper()
	var hits []object
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && (name == "" || md["name"] == name) {
			hits = append(hits, o)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("%d objects of kind %s named %q in %v, want 1", len(hits), kind, name, kindNames(objs))
	}
	data, err := json.Marshal(hits[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

func TestChartLint(t *testing.T) {
	t.Parallel()
	mustHelm(t, "lint", "--strict", chartDir)
	mustHelm(t, append([]string{"lint", "--strict", chartDir, "-n", "batch"}, exampleArgs()...)...)
	mustHelm(t, "lint", "--strict", chartDir, "--set", "prometheusRule.enabled=true,dashboard.enabled=true,capacity=false")
}

// TestChartDefaults: with no values the chart renders the kustomize base's objects, named after the release, the
// image of its appVersion, and a jobsched.yaml completed with the release's namespace and name.
func TestChartDefaults(t *testing.T) {
	t.Parallel()
	objs := helmTemplate(t, "nightly", "batch")
	want := []string{
		"ClusterRole jobsched-capacity-nightly-batch", "ClusterRoleBinding jobsched-capacity-nightly-batch",
		"ConfigMap batch/jobsched-nightly-config", "CronJob batch/jobsched-nightly", "Role batch/jobsched-nightly",
		"RoleBinding batch/jobsched-nightly", "ServiceAccount batch/jobsched-nightly",
	}
	if got := kindNames(objs); !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	var cj batchv1.CronJob
	find(t, objs, "CronJob", "", &cj)
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if got, want := pod.Containers[0].Image, "ghcr.io/jobsched/jobsched:v0.1.0"; got != want {
		t.Errorf("image %q, want %q (the chart's appVersion)", got, want)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || *cj.Spec.StartingDeadlineSeconds != 120 || *cj.Spec.JobTemplate.Spec.BackoffLimit != 0 ||
		*cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds != 240 || *cj.Spec.JobTemplate.Spec.TTLSecondsAfterFinished != 3600 || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the CronJob's policies differ from the kustomize base's: %+v", cj.Spec)
	}
	// Hardened by default: the restricted Pod Security Standard.
	wantPodSC := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if !reflect.DeepEqual(pod.SecurityContext, wantPodSC) {
		t.Errorf("pod securityContext %+v, want %+v", pod.SecurityContext, wantPodSC)
	}
	wantSC := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if !reflect.DeepEqual(pod.Containers[0].SecurityContext, wantSC) {
		t.Errorf("container securityContext %+v, want %+v", pod.Containers[0].SecurityContext, wantSC)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "", &cm)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["jobsched.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["namespace"] != "batch" || cfg["name"] != "nightly" || cfg["job"].(map[string]any)["template"] != "job.yaml" {
		t.Errorf("jobsched.yaml %v: want namespace batch, name nightly, job.template job.yaml", cfg)
	}
	// jobsched itself accepts the files the chart mounts: a dry run of one row plans its Job.
	dir := t.TempDir()
	for f, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "rows.jsonl"), []byte(`{"id": "a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dry := runCommand(t, jobschedCommand(t.Context(), "", "", nil,
		"dry-run", "--offline", "--config", filepath.Join(dir, "jobsched.yaml"), "--rows", filepath.Join(dir, "rows.jsonl"), "-o", "yaml"))
	if dry.code != 0 {
		t.Fatalf("jobsched dry-run --offline of the chart's default config: exit %d\n%s", dry.code, dry.stderr)
	}
	if got, want := planJobNames(t, dry.stdout), expectedNames("nightly", []string{"a"}); !slices.Equal(got, want) {
		t.Errorf("the dry run plans Jobs %v, want %v", got, want)
	}
	var crb rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", "", &crb)
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "jobsched-nightly", Namespace: "batch"}}; !reflect.DeepEqual(crb.Subjects, want) {
		t.Errorf("ClusterRoleBinding subjects %+v, want %+v", crb.Subjects, want)
	}
}

// TestChartValues: each conventional value reaches the field it names.
func TestChartValues(t *testing.T) {
	t.Parallel()
	values := `
image: {registry: registry.example.com, repository: team/jobsched, tag: v0.2.0, pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
schedule: "*/5 * * * *"
timeZone: Europe/Berlin
suspend: true
startingDeadlineSeconds: 30
successfulJobsHistoryLimit: 2
failedJobsHistoryLimit: 5
activeDeadlineSeconds: 240
ttlSecondsAfterFinished: 600
database: {secretName: reports-dsn, secretKey: url}
config:
  source: {dsnEnv: REPORTS_DSN, query: "SELECT id FROM t", key: id}
  limits: {capacity: quota}
capacity: false
serviceAccount: {name: reports-runner, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/r"}}
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}
nodeSelector: {pool: system}
tolerations: [{key: dedicated, operator: Equal, value: system, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}}}
priorityClassName: batch-high
commonLabels: {team: data}
commonAnnotations: {owner: data-team}
podLabels: {sidecar.istio.io/inject: "false"}
podAnnotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: "true"}
extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
`
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := helmTemplate(t, "reports", "batch", "-f", path)
	if got, want := kindNames(objs), []string{"ConfigMap batch/jobsched-reports-config", "CronJob batch/jobsched-reports",
		"Role batch/jobsched-reports", "RoleBinding batch/jobsched-reports", "ServiceAccount batch/reports-runner"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v (capacity: false has no cluster-scoped objects)", got, want)
	}
	for _, o := range objs {
		md := o["metadata"].(map[string]any)
		if md["labels"].(map[string]any)["team"] != "data" || md["annotations"] == nil || md["annotations"].(map[string]any)["owner"] != "data-team" {
			t.Errorf("%s: commonLabels/commonAnnotations missing: %v", kindName(o), md)
		}
	}
	var cj batchv1.CronJob
	find(t, objs, "CronJob", "", &cj)
	s := cj.Spec
	if s.Schedule != "*/5 * * * *" || *s.TimeZone != "Europe/Berlin" || !*s.Suspend || *s.StartingDeadlineSeconds != 30 ||
		*s.SuccessfulJobsHistoryLimit != 2 || *s.FailedJobsHistoryLimit != 5 || *s.JobTemplate.Spec.ActiveDeadlineSeconds != 240 ||
		*s.JobTemplate.Spec.TTLSecondsAfterFinished != 600 {
		t.Errorf("CronJob spec %+v does not carry the schedule values", s)
	}
	tpl := s.JobTemplate.Spec.Template
	if tpl.Labels["sidecar.istio.io/inject"] != "false" || tpl.Labels["app.kubernetes.io/instance"] != "reports" ||
		tpl.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "true" {
		t.Errorf("pod template metadata %+v: podLabels, podAnnotations, instance label", tpl.ObjectMeta)
	}
	pod := tpl.Spec
	wantPod := corev1.PodSpec{
		ServiceAccountName:           "reports-runner",
		AutomountServiceAccountToken: ptr.To(true),
		RestartPolicy:                corev1.RestartPolicyNever,
		PriorityClassName:            "batch-high",
		ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "regcred"}},
		SecurityContext:              pod.SecurityContext,
		NodeSelector:                 map[string]string{"pool": "system"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}}}}},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "system", Effect: "NoSchedule"}},
		Containers:  pod.Containers,
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "jobsched-reports-config"}}}}},
	}
	if !reflect.DeepEqual(pod, wantPod) {
		t.Errorf("pod spec\n%+v\nwant\n%+v", pod, wantPod)
	}
	c := pod.Containers[0]
	if c.Image != "registry.example.com/team/jobsched:v0.2.0" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q %q", c.Image, c.ImagePullPolicy)
	}
	if cj.Labels["app.kubernetes.io/version"] != "v0.2.0" {
		t.Errorf("version label %q, want the image's tag v0.2.0", cj.Labels["app.kubernetes.io/version"])
	}
	if !reflect.DeepEqual(c.Env[0], corev1.EnvVar{Name: "REPORTS_DSN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "reports-dsn"}, Key: "url"}}}) {
		t.Errorf("the DSN variable %+v: want source.dsnEnv from database.secretName/secretKey", c.Env[0])
	}
	if last := c.Env[len(c.Env)-1]; last.Name != "HTTPS_PROXY" {
		t.Errorf("extraEnv missing: %+v", c.Env)
	}
	if c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("resources %+v", c.Resources)
	}
	var sa corev1.ServiceAccount
	find(t, objs, "ServiceAccount", "", &sa)
	if sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("serviceAccount.annotations missing: %+v", sa.ObjectMeta)
	}
	var rb rbacv1.RoleBinding
	find(t, objs, "RoleBinding", "", &rb)
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reports-runner", Namespace: "batch"}}; !reflect.DeepEqual(rb.Subjects, want) {
		t.Errorf("RoleBinding subjects %+v, want %+v", rb.Subjects, want)
	}

	// A digest pins the image; rbac.create false and serviceAccount.create false leave RBAC to the user.
	objs = helmTemplate(t, "reports", "batch", "--set", "image.digest=sha256:"+strings.Repeat("ab", 32)+",rbac.create=false,serviceAccount.create=false,serviceAccount.name=existing")
	if got, want := kindNames(objs), []string{"ConfigMap batch/jobsched-reports-config", "CronJob batch/jobsched-reports"}; !slices.Equal(got, want) {
		t.Errorf("objects %v, want %v", got, want)
	}
	find(t, objs, "CronJob", "", &cj)
	if got := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/jobsched/jobsched@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("image %q: want the digest", got)
	}
	if got := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName; got != "existing" {
		t.Errorf("serviceAccountName %q, want existing", got)
	}
}

// TestChartRejects: a wrong value fails at `helm install`/`template` (the values schema, or the chart's checks of
// jobsched.yaml), naming what is wrong, instead of at the first tick.
func TestChartRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var files int
	file := func(content string) string {
		files++
		path := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", files))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a misspelt key", []string{"--set", "schedul=*/5 * * * *"}, "schedul"},
		{"schedule not a string", []string{"--set", "schedule=5"}, "schedule"},
		{"suspend not a boolean", []string{"--set-string", "suspend=yes"}, "suspend"},
		{"pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "pullPolicy"},
		{"negative deadline", []string{"--set", "startingDeadlineSeconds=-1"}, "startingDeadlineSeconds"},
		{"log format", []string{"--set", "logFormat=xml"}, "logFormat"},
		{"capacity not a boolean", []string{"--set-string", "capacity=nodes"}, "capacity"},
		{"a digest that is not one", []string{"--set", "image.digest=latest"}, "digest"},
		{"a scheduler name that is no label", []string{"--set", "config.name=Reports_1"}, "name"},
		{"config in another namespace", []string{"--set", "config.namespace=other"}, `config.namespace is "other" but the release is in "batch"`},
		{"another template file", []string{"--set", "config.job.template=other.yaml"}, "config.job.template"},
		{"a DSN file", []string{"--set", "config.source.dsnFile=/secret/dsn"}, "config.source.dsnFile"},
		{"a config file without a name", []string{"--set-file", "config=" + file("source: {query: SELECT 1, key: id}\njob: {template: job.yaml}\n")}, "the file has no name"},
		{"a config file without job.template", []string{"--set-file", "config=" + file("name: x\nsource: {query: SELECT 1, key: id}\n")}, "the file has no job.template"},
		{"a config file that is not YAML", []string{"--set-file", "config=" + file("name: [x\n")}, "config: not YAML"},
		{"no ServiceAccount to use", []string{"--set", "serviceAccount.create=false"}, "serviceAccount.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runHelm(t, append([]string{"template", "reports", chartDir, "-n", "batch"}, c.args...)...)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want an error naming %q:\n%s", c.args, c.want, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("the error does not name %q:\n%v", c.want, err)
			}
		})
	}
}

// TestChartMonitoring: the toggles ship manifests/monitoring's rules and dashboard unchanged.
func TestChartMonitoring(t *testing.T) {
	t.Parallel()
	objs := helmTemplate(t, "reports", "batch")
	for _, o := range objs {
		if o["kind"] == "PrometheusRule" || strings.HasSuffix(kindName(o), "-dashboard") {
			t.Errorf("%s rendered without its toggle", kindName(o))
		}
	}
	objs = helmTemplate(t, "reports", "batch", "--set", "prometheusRule.enabled=true,prometheusRule.namespace=monitoring,prometheusRule.labels.release=kube-prometheus-stack",
		"--set", "dashboard.enabled=true,dashboard.namespace=grafana,dashboard.annotations.grafana_folder=jobsched")
	var rule struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	find(t, objs, "PrometheusRule", "", &rule)
	if rule.Metadata.Namespace != "monitoring" || rule.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule metadata %+v: want namespace monitoring and the label release", rule.Metadata)
	}
	if want := rulesFileGroups(t); !reflect.DeepEqual(rule.Spec.Groups, want) {
		t.Errorf("the PrometheusRule's groups differ from manifests/monitoring/jobsched.rules.yaml:\n%v\nwant\n%v", rule.Spec.Groups, want)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "jobsched-reports-dashboard", &cm)
	if cm.Namespace != "grafana" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "jobsched" {
		t.Errorf("dashboard ConfigMap metadata %+v: want namespace grafana, label grafana_dashboard=1, the folder annotation", cm.ObjectMeta)
	}
	dash, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["jobsched.json"] != string(dash) {
		t.Errorf("the dashboard ConfigMap's jobsched.json differs from manifests/monitoring/dashboard.json")
	}
}

// normalize removes what only one of the tools adds, so that helm's and kustomize's renderings of one install
// compare equal: the labels naming the tool (app.kubernetes.io/managed-by, helm.sh/chart), kustomize's hash suffix
// on the ConfigMap's name (and the CronJob's reference to it), and two fields helm writes out at their API default
// (suspend: false, imagePullPolicy: IfNotPresent for a tagged image).
func normalize(t *testing.T, objs []object) map[string]object {
	t.Helper()
	stripLabels := func(m any) {
		if md, ok := m.(map[string]any); ok {
			if labels, ok := md["labels"].(map[string]any); ok {
				delete(labels, "app.kubernetes.io/managed-by")
				delete(labels, "helm.sh/chart")
			}
		}
	}
	out := map[string]object{}
	for _, o := range objs {
		stripLabels(o["metadata"])
		switch o["kind"] {
		case "ConfigMap":
			o["metadata"].(map[string]any)["name"] = "CONFIG"
		case "CronJob":
			spec := o["spec"].(map[string]any)
			if spec["suspend"] == false {
				delete(spec, "suspend")
			}
			jt := spec["jobTemplate"].(map[string]any)
			stripLabels(jt["metadata"])
			tpl := jt["spec"].(map[string]any)["template"].(map[string]any)
			stripLabels(tpl["metadata"])
			pod := tpl["spec"].(map[string]any)
			for _, c := range pod["containers"].([]any) {
				if c.(map[string]any)["imagePullPolicy"] == "IfNotPresent" {
					delete(c.(map[string]any), "imagePullPolicy")
				}
			}
			for _, v := range pod["volumes"].([]any) {
				if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
					cm["name"] = "CONFIG"
				}
			}
		}
		key := kindName(o)
		if _, dup := out[key]; dup {
			t.Fatalf("two objects %s", key)
		}
		out[key] = o
	}
	return out
}

// TestChartMatchesKustomize: `helm template` of the reports example (the README's "Install with Helm") and
// `kubectl kustomize` of manifests/examples/reports render the same objects, field for field, but for what each tool
// adds (see normalize). The ConfigMap's files are the example's, byte for byte.
func TestChartMatchesKustomize(t *testing.T) {
	t.Parallel()
	needHelm(t)
	helmObjs := normalize(t, helmTemplate(t, "reports", "batch", exampleArgs()...))
	cmd := exec.Command("kubectl", "kustomize", filepath.Join(repoRoot, "manifests", "examples", "reports"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	kustObjs := normalize(t, decodeObjects(t, string(out)))
	var keys []string
	for k := range kustObjs {
		keys = append(keys, k)
	}
	for k := range helmObjs {
		if _, ok := kustObjs[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		h, kz := helmObjs[k], kustObjs[k]
		if !reflect.DeepEqual(h, kz) {
			hy, _ := yaml.Marshal(h)
			ky, _ := yaml.Marshal(kz)
			t.Errorf("%s differs.\nhelm:\n%s\nkustomize:\n%s", k, hy, ky)
		}
	}
}

// TestChartReleasesDoNotCollide: releases of the chart in one namespace and across namespaces render no object
// name twice and, by default, different schedulers (the jobsched.io/scheduler label and the Jobs' name prefix).
func TestChartReleasesDoNotCollide(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	schedulers := map[string]string{}
	for _, r := range [][2]string{{"reports", "batch"}, {"exports", "batch"}, {"reports", "etl"}} {
		for _, o := range helmTemplate(t, r[0], r[1]) {
			k := kindName(o)
			if prev, dup := seen[k]; dup {
				t.Errorf("%s is rendered by release %s/%s and %s", k, r[1], r[0], prev)
			}
			seen[k] = r[1] + "/" + r[0]
			if o["kind"] == "ConfigMap" {
				var cfg struct {
					Name, Namespace string
				}
				if err := yaml.Unmarshal([]byte(o["data"].(map[string]any)["jobsched.yaml"].(string)), &cfg); err != nil {
					t.Fatal(err)
				}
				id := cfg.Namespace + "/" + cfg.Name
				if prev, dup := schedulers[id]; dup {
					t.Errorf("scheduler %s is configured by release %s/%s and %s", id, r[1], r[0], prev)
				}
				schedulers[id] = r[1] + "/" + r[0]
			}
		}
	}
}

// chartValues writes a values file for a release that runs a scheduler on this scenario's table and pool: the
// CronJob suspended (the test runs the pass itself, as the chart's ServiceAccount).
func (e *env) chartValues(name string) string {
	e.t.Helper()
	v := fmt.Sprintf(`suspend: true
config:
  name: %s
  source:
    query: SELECT id, url, created_at FROM %s WHERE status = 'waiting' ORDER BY n
    key: id
  limits:
    capacity: nodes
jobTemplate:
`, name, e.table) + indent(jobTemplate{duration: "60s", podSpec: taskPodSpec(e.pool, "worker", "100m", "64Mi")}.yaml(), "  ")
	path := filepath.Join(e.dir, name+"-values.yaml")
	if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// mountedConfig writes the release's ConfigMap to a directory as the CronJob's pod mounts it at /etc/jobsched, and
// returns that directory.
func (e *env) mountedConfig(ns, name string) string {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	dir := filepath.Join(e.dir, ns+"-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for f, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	return dir
}

// releaseObjects lists what a release made, by the names the chart gives and its instance label.
func (e *env) releaseObjects(ns, release string) []string {
	e.t.Helper()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=jobsched,app.kubernetes.io/instance=" + release}
	var out []string
	add := func(kind string, n int, err error) {
		e.t.Helper()
		if err != nil {
			e.t.Fatal(err)
		}
		for range n {
			out = append(out, kind)
		}
	}
	ctx := e.ctx
	sas, err := e.kube.CoreV1().ServiceAccounts(ns).List(ctx, sel)
	add("ServiceAccount", len(sas.Items), err)
	cms, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, sel)
	add("ConfigMap", len(cms.Items), err)
	cjs, err := e.kube.BatchV1().CronJobs(ns).List(ctx, sel)
	add("CronJob", len(cjs.Items), err)
	roles, err := e.kube.RbacV1().Roles(ns).List(ctx, sel)
	add("Role", len(roles.Items), err)
	rbs, err := e.kube.RbacV1().RoleBindings(ns).List(ctx, sel)
	add("RoleBinding", len(rbs.Items), err)
	crName := "jobsched-capacity-" + release + "-" + ns
	_, err = e.kube.RbacV1().ClusterRoles().Get(ctx, crName, metav1.GetOptions{})
	if err == nil {
		out = append(out, "ClusterRole")
	} else if !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	_, err = e.kube.RbacV1().ClusterRoleBindings().Get(ctx, crName, metav1.GetOptions{})
	if err == nil {
		out = append(out, "ClusterRoleBinding")
	} else if !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestChartInstall: `helm install` into the local control plane, two releases in one namespace and one of the same
// name in a second namespace; a pass of each runs as its release's ServiceAccount (its token, its Role and its
// capacity ClusterRoleBinding) with the config its release mounts, and creates its own Jobs only; `helm uninstall`
// of one release leaves nothing of it and all of the others.
func TestChartInstall(t *testing.T) {
	t.Parallel()
	needHelm(t)
	e := newEnv(t)
	e.addNode("n1", "8", "16Gi", 110, nil)
	other := fmt.Sprintf("e2e-chart-%04x", rand.IntN(0xffff))
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range [][2]string{{"reports", e.ns}, {"exports", e.ns}, {"reports", other}} {
			_, _ = runHelm(t, "uninstall", r[0], "-n", r[1], "--ignore-not-found")
		}
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{})
	})
	releases := []struct{ release, ns, scheduler string }{
		{"reports", e.ns, "reports"}, {"exports", e.ns, "exports"}, {"reports", other, "reports"},
	}
	for _, r := range releases {
		// --wait: helm returns once the objects exist (a CronJob has no readiness of its own).
		mustHelm(t, "install", r.release, chartDir, "-n", r.ns, "-f", e.chartValues(r.scheduler), "--wait", "--timeout", "2m")
	}
	e.insert("row", 2)

	for _, r := range releases {
		want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Role", "RoleBinding", "ServiceAccount"}
		if got := e.releaseObjects(r.ns, r.release); !slices.Equal(got, want) {
			t.Fatalf("release %s/%s made %v, want %v", r.ns, r.release, got, want)
		}
		cj, err := e.kube.BatchV1().CronJobs(r.ns).Get(e.ctx, "jobsched-"+r.release, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sa := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
		kcfg := tokenKubeconfig(t, kubeconfig, r.ns, sa)
		dir := e.mountedConfig(r.ns, "jobsched-"+r.release+"-config")
		s := tickAs(t, dir, kcfg, dsn)
		if s.Failed != 0 {
			t.Errorf("release %s/%s: the pass as %s failed %d writes", r.ns, r.release, sa, s.Failed)
		}
		// The scheduler in the second namespace reads the same table: Jobs of its own, in its own namespace.
		if got, want := mustNames(t, e, r.ns, r.scheduler), expectedNames(r.scheduler, []string{"row-0", "row-1"}); !slices.Equal(got, want) {
			t.Errorf("release %s/%s: scheduler %s has Jobs %v, want %v", r.ns, r.release, r.scheduler, got, want)
		}
	}

	mustHelm(t, "uninstall", "reports", "-n", e.ns, "--wait", "--timeout", "2m")
	if got := e.releaseObjects(e.ns, "reports"); len(got) != 0 {
		t.Errorf("after helm uninstall, release %s/reports left %v", e.ns, got)
	}
	if out := mustHelm(t, "list", "-n", e.ns, "-q", "--filter", "^reports$"); strings.TrimSpace(out) != "" {
		t.Errorf("helm still lists the release: %q", out)
	}
	all := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Role", "RoleBinding", "ServiceAccount"}
	for _, r := range releases[1:] {
		if got := e.releaseObjects(r.ns, r.release); !slices.Equal(got, all) {
			t.Errorf("after uninstalling %s/reports, release %s/%s has %v, want %v", e.ns, r.ns, r.release, got, all)
		}
	}
}

func mustNames(t *testing.T, e *env, ns, scheduler string) []string {
	t.Helper()
	names, _ := schedulerJobs(t, e.kube, ns, scheduler)
	return names
}

// TestChartCapacityNameClash: the cluster-scoped names join release and namespace with "-", so release r-s in
// namespace N and release r in namespace s-N would share jobsched-capacity-r-s-N. helm refuses the second install
// (the object belongs to another release) rather than taking over the first one's binding.
func TestChartCapacityNameClash(t *testing.T) {
	t.Parallel()
	needHelm(t)
	e := newEnv(t)
	other := "s-" + e.ns
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = runHelm(t, "uninstall", "r-s", "-n", e.ns, "--ignore-not-found")
		_, _ = runHelm(t, "uninstall", "r", "-n", other, "--ignore-not-found")
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{})
	})
	mustHelm(t, "install", "r-s", chartDir, "-n", e.ns, "--set", "suspend=true")
	_, err := runHelm(t, "install", "r", chartDir, "-n", other, "--set", "suspend=true")
	if err == nil || !strings.Contains(err.Error(), "cannot be imported into the current release") {
		t.Fatalf("installing release r in %s: %v; want helm's refusal of the other release's ClusterRole", other, err)
	}
	crb, err := e.kube.RbacV1().ClusterRoleBindings().Get(e.ctx, "jobsched-capacity-r-s-"+e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "jobsched-r-s", Namespace: e.ns}}; !reflect.DeepEqual(crb.Subjects, want) {
		t.Errorf("after the refused install the binding's subjects are %+v, want %+v", crb.Subjects, want)
	}
}

// TestChartKueue: kueue=true gives the release's Role exactly the rule of the kustomize component manifests/kueue
// (get/list on Workloads and LocalQueues, for status in the Kueue mode); by default the Role has no such rule.
func TestChartKueue(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "kueue", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var component rbacv1.Role
	if err := yaml.Unmarshal(data, &component); err != nil {
		t.Fatal(err)
	}
	kueueRules := func(r rbacv1.Role) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "kueue.x-k8s.io") {
				out = append(out, rule)
			}
		}
		return out
	}
	var role rbacv1.Role
	find(t, helmTemplate(t, "reports", "batch"), "Role", "", &role)
	if got := kueueRules(role); len(got) != 0 {
		t.Errorf("by default the Role has Kueue rules %+v, want none", got)
	}
	find(t, helmTemplate(t, "reports", "batch", "--set", "kueue=true"), "Role", "", &role)
	if got, want := kueueRules(role), component.Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("with kueue=true the Role's Kueue rules are %+v, want manifests/kueue's %+v", got, want)
	}
}

// TestChartAutoscale: autoscale=true gives the release exactly the rules of the kustomize component
// manifests/autoscale: its ClusterRole's (NodePools, NodeClaims, the cluster-autoscaler's ConfigMap), named per
// release and namespace, and its Role's (Events) in the release's Role; by default neither.
func TestChartAutoscale(t *testing.T) {
	t.Parallel()
	component := func(file string) []rbacv1.PolicyRule {
		data, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "autoscale", file))
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(data, &role); err != nil {
			t.Fatal(err)
		}
		return role.Rules
	}
	events := func(r rbacv1.Role) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "events") && slices.Contains(rule.APIGroups, "") {
				out = append(out, rule)
			}
		}
		return out
	}
	var role rbacv1.Role
	objs := helmTemplate(t, "reports", "batch")
	find(t, objs, "Role", "", &role)
	if got := events(role); len(got) != 0 {
		t.Errorf("by default the Role has the autoscale rules %+v, want none", got)
	}
	if slices.Contains(kindNames(objs), "ClusterRole jobsched-autoscale-reports-batch") {
		t.Error("by default the chart renders the autoscale ClusterRole")
	}
	objs = helmTemplate(t, "reports", "batch", "--set", "autoscale=true")
	find(t, objs, "Role", "", &role)
	if got, want := events(role), component("role.yaml"); !reflect.DeepEqual(got, want) {
		t.Errorf("with autoscale=true the Role's autoscale rules are %+v, want manifests/autoscale's %+v", got, want)
	}
	var cr rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "jobsched-autoscale-reports-batch", &cr)
	if got, want := cr.Rules, component("clusterrole.yaml"); !reflect.DeepEqual(got, want) {
		t.Errorf("with autoscale=true the ClusterRole's rules are %+v, want manifests/autoscale's %+v", got, want)
	}
	var crb rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", "jobsched-autoscale-reports-batch", &crb)
	if crb.RoleRef.Name != cr.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != "batch" {
		t.Errorf("binding %+v", crb)
	}
}
