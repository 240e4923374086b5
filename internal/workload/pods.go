package workload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Pods makes Kubernetes-shaped pod objects as the apiserver stores them in
// etcd (JSON here; the apiserver's default is protobuf, which is smaller
// but repeats the same strings): metadata with labels, annotations (the
// kubectl last-applied-configuration among them), owner references and
// managedFields, a spec of one to three containers with environment,
// resources, probes and volume mounts, and a status with conditions and
// container statuses. Sizes fall between about 10 and 20 KB, as pods in
// large clusters do. The repetition across pods (image names, label keys,
// field manager entries) is what a store's compression sees.
//
// A Pods holds no mutable state: pod i at generation g is the same bytes
// for the same seed, from any goroutine.
type Pods struct {
	seed   int64
	once   [podShapes]sync.Once
	shapes [podShapes]*podShape
}

// NewPods returns the pod generator of seed.
func NewPods(seed int64) *Pods { return &Pods{seed: seed} }

// PodKey is the apiserver's key of pod name in namespace:
// /registry/pods/<namespace>/<name>.
func PodKey(namespace, name string) string {
	return "/registry/pods/" + namespace + "/" + name
}

// podShapes is how many distinct pod templates (a Deployment's pod spec,
// shared by its replicas) the generator makes; pods differ from their
// template's siblings in names, ids, addresses, times and status, as a
// ReplicaSet's pods do.
const podShapes = 512

// Name returns the namespace and name of pod i: 50 namespaces, names
// shaped as a Deployment's pods (app-<hash>-<suffix>).
func (p *Pods) Name(i int) (namespace, name string) {
	r := p.rng(i, 0)
	namespace = fmt.Sprintf("%s-%02d", teams[i%len(teams)], i%50)
	name = fmt.Sprintf("%s-%08x-%05d", p.shape(i%podShapes).app, r.Uint32(), i%100000)
	return namespace, name
}

// Key returns pod i's key.
func (p *Pods) Key(i int) string { return PodKey(p.Name(i)) }

// Pod returns pod i at generation gen (0 is the created object; each
// update the apiserver makes changes status, a label and the managed
// fields' times).
func (p *Pods) Pod(i, gen int) []byte {
	namespace, name := p.Name(i)
	r := p.rng(i, 0)
	r.Uint32() // the name's hash
	g := p.rng(i, gen+1)
	created := podEpoch.Add(time.Duration(i) * time.Second)
	updated := created.Add(time.Duration(gen) * 37 * time.Second)
	ready := gen%5 != 4
	vals := [len(podHoles)]string{
		namespace, name, name[:len(name)-5],
		uuid(r), uuid(r), hexDigits(r, 8),
		fmt.Sprintf("node-%03d.cluster.example.internal", r.IntN(500)),
		fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), 1+r.IntN(254)),
		fmt.Sprintf("172.%d.%d.%d", 16+r.IntN(16), r.IntN(256), 1+r.IntN(254)),
		stamp(created), stamp(created.Add(time.Second)),
		stamp(created.Add(2 * time.Second)), stamp(created.Add(4 * time.Second)),
		stamp(updated), stamp(updated.Add(-time.Duration(g.IntN(3600)) * time.Second)),
		stamp(updated.Add(-time.Duration(g.IntN(600)) * time.Second)),
		fmt.Sprint(gen), boolText(ready),
		fmt.Sprint(ready), fmt.Sprint(g.IntN(3) + gen/7),
		hexDigits(g, 64),
	}
	return p.shape(i % podShapes).fill(&vals)
}

// podHoles are the placeholders of a template, in the order Pod computes
// their values; where two could match at one place, the earlier wins.
var podHoles = [...]string{
	"@NS@", "@NAME@", "@GENNAME@", "@UID@", "@OUID@", "@HASH@", "@NODE@",
	"@HOSTIP@", "@PODIP@", "@CREATED@", "@C1@", "@C2@", "@C4@", "@UPDATED@",
	"@APPLIED@", "@STARTED@", "@ROLL@", "@READYTEXT@", `"@READY@"`,
	`"@RESTARTS@"`, "@CID@",
}

// podShape is a template: a pod's JSON with placeholders for what differs
// between the replicas of one Deployment and between generations.
type podShape struct {
	app string
	// The template cut at its placeholders: literal text, then a
	// placeholder (an index into podHoles), then literal text, and so on,
	// so that a pod is its template filled in one pass: 7.8 us a pod
	// (BenchmarkPod), where a strings.Replacer of the placeholders took
	// 61 us and 30% of strata bench kube's own CPU, which competes with
	// the servers' when they share the machine's CPUs (--pin=false).
	literals []string
	holes    []int
	size     int // the template's length, a pod's usual one
}

// cutTemplate returns the shape of template json.
func cutTemplate(app, json string) *podShape {
	sh := &podShape{app: app, size: len(json)}
	last := 0
	for i := 0; i < len(json); i++ {
		if json[i] != '@' && json[i] != '"' {
			continue
		}
		for h, hole := range podHoles {
			if strings.HasPrefix(json[i:], hole) {
				sh.literals = append(sh.literals, json[last:i])
				sh.holes = append(sh.holes, h)
				i += len(hole) - 1
				last = i + 1
				break
			}
		}
	}
	sh.literals = append(sh.literals, json[last:])
	return sh
}

// fill returns the template with each placeholder h replaced by vals[h].
func (sh *podShape) fill(vals *[len(podHoles)]string) []byte {
	b := make([]byte, 0, sh.size+sh.size/8)
	for k, h := range sh.holes {
		b = append(b, sh.literals[k]...)
		b = append(b, vals[h]...)
	}
	return append(b, sh.literals[len(sh.holes)]...)
}

// shape returns template s, made on first use.
func (p *Pods) shape(s int) *podShape {
	p.once[s].Do(func() { p.shapes[s] = p.makeShape(s) })
	return p.shapes[s]
}

func (p *Pods) makeShape(s int) *podShape {
	r := rand.New(rand.NewPCG(uint64(p.seed), 1<<40|uint64(s)))
	app := apps[r.IntN(len(apps))]
	team := teams[s%len(teams)]
	labels := map[string]string{
		"app":                          app,
		"app.kubernetes.io/name":       app,
		"app.kubernetes.io/instance":   app + "-@NS@",
		"app.kubernetes.io/component":  components[r.IntN(len(components))],
		"app.kubernetes.io/part-of":    team,
		"app.kubernetes.io/managed-by": "Helm",
		"pod-template-hash":            "@HASH@",
		"release":                      fmt.Sprintf("v%d.%d.%d", 1+r.IntN(3), r.IntN(20), r.IntN(10)),
		"rollout-generation":           "@ROLL@",
	}
	nContainers := 1 + r.IntN(3)
	containers := make([]container, nContainers)
	statuses := make([]containerStatus, nContainers)
	for c := range containers {
		containers[c] = makeContainer(r, app, c)
		statuses[c] = containerStatus{
			Name:         containers[c].Name,
			Ready:        "@READY@",
			RestartCount: "@RESTARTS@",
			Image:        containers[c].Image,
			ImageID:      "docker-pullable://" + containers[c].Image + "@sha256:" + hexDigits(r, 64),
			ContainerID:  fmt.Sprintf("containerd://%d@CID@", c),
			Started:      true,
			State:        map[string]any{"running": map[string]string{"startedAt": "@STARTED@"}},
		}
	}
	spec := podSpec{
		Containers:                    containers,
		Volumes:                       makeVolumes(r, app),
		RestartPolicy:                 "Always",
		TerminationGracePeriodSeconds: 30,
		DNSPolicy:                     "ClusterFirst",
		ServiceAccountName:            app,
		NodeName:                      "@NODE@",
		SecurityContext:               map[string]any{"runAsNonRoot": true, "runAsUser": 1000, "fsGroup": 2000, "seccompProfile": map[string]string{"type": "RuntimeDefault"}},
		SchedulerName:                 "default-scheduler",
		Tolerations: []map[string]any{
			{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
			{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
		},
		Priority:           0,
		EnableServiceLinks: true,
		PreemptionPolicy:   "PreemptLowerPriority",
	}
	lastApplied, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"labels": labels, "name": "@NAME@", "namespace": "@NS@"}, "spec": map[string]any{"containers": containers}})
	if err != nil {
		panic(err) // only plain maps, slices and strings: cannot fail
	}
	obj := pod{
		APIVersion: "v1",
		Kind:       "Pod",
		Metadata: objectMeta{
			Name:              "@NAME@",
			GenerateName:      "@GENNAME@",
			Namespace:         "@NS@",
			UID:               "@UID@",
			CreationTimestamp: "@CREATED@",
			Labels:            labels,
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied),
				"prometheus.io/scrape":                             "true",
				"prometheus.io/port":                               "9090",
				"kubectl.kubernetes.io/restartedAt":                "@UPDATED@",
			},
			OwnerReferences: []map[string]any{{
				"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app + "-@HASH@",
				"uid": "@OUID@", "controller": true, "blockOwnerDeletion": true,
			}},
			ManagedFields: makeManagedFields(nContainers),
		},
		Spec: spec,
		Status: podStatus{
			Phase: "Running",
			Conditions: []condition{
				{Type: "PodReadyToStartContainers", Status: "True", LastTransitionTime: "@C4@"},
				{Type: "Initialized", Status: "True", LastTransitionTime: "@C2@"},
				{Type: "Ready", Status: "@READYTEXT@", LastTransitionTime: "@UPDATED@"},
				{Type: "ContainersReady", Status: "@READYTEXT@", LastTransitionTime: "@UPDATED@"},
				{Type: "PodScheduled", Status: "True", LastTransitionTime: "@CREATED@"},
			},
			HostIP:            "@HOSTIP@",
			PodIP:             "@PODIP@",
			StartTime:         "@C1@",
			ContainerStatuses: statuses,
			QOSClass:          "Burstable",
		},
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return cutTemplate(app, string(b))
}

// rng returns pod i's random source for stream s (0: the pod's own
// parts; g+1: what generation g changes).
func (p *Pods) rng(i, s int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(p.seed), uint64(i)<<20|uint64(s)))
}

var podEpoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

var (
	apps       = []string{"checkout", "payments", "catalog", "search-api", "frontend", "inventory", "shipping", "recommendations", "auth-gateway", "notifications", "billing-worker", "metrics-exporter", "ledger", "orders", "image-resizer", "session-store"}
	teams      = []string{"retail", "platform", "data", "identity", "growth", "infra"}
	components = []string{"server", "worker", "cache", "proxy", "batch"}
	registries = []string{"registry.example.com/", "ghcr.io/example/", "docker.io/library/", "quay.io/example/"}
	envNames   = []string{"LOG_LEVEL", "LOG_FORMAT", "HTTP_PORT", "GRPC_PORT", "DATABASE_URL", "REDIS_ADDR", "KAFKA_BROKERS", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "FEATURE_FLAGS", "REGION", "ZONE", "CACHE_TTL_SECONDS", "MAX_CONNECTIONS", "REQUEST_TIMEOUT", "JAVA_OPTS", "GOMAXPROCS", "GOMEMLIMIT", "POD_NAME", "POD_NAMESPACE", "NODE_NAME", "SENTRY_DSN"}
)

func makeContainer(r *rand.Rand, app string, c int) container {
	name := app
	if c > 0 {
		name = []string{"istio-proxy", "log-shipper", "config-reloader"}[c-1]
	}
	env := make([]map[string]any, 0, 12)
	for _, k := range r.Perm(len(envNames))[:8+r.IntN(10)] {
		n := envNames[k]
		switch {
		case n == "POD_NAME" || n == "POD_NAMESPACE" || n == "NODE_NAME":
			env = append(env, map[string]any{"name": n, "valueFrom": map[string]any{"fieldRef": map[string]string{"apiVersion": "v1", "fieldPath": "metadata.name"}}})
		case n == "DATABASE_URL" || n == "SENTRY_DSN":
			env = append(env, map[string]any{"name": n, "valueFrom": map[string]any{"secretKeyRef": map[string]string{"name": app + "-secrets", "key": n}}})
		default:
			env = append(env, map[string]any{"name": n, "value": fmt.Sprintf("%s-%d", app, r.IntN(1000))})
		}
	}
	probe := map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
	return container{
		Name:            name,
		Image:           fmt.Sprintf("%s%s:%d.%d.%d", registries[r.IntN(len(registries))], name, r.IntN(5), r.IntN(30), r.IntN(20)),
		Args:            []string{"--config=/etc/" + app + "/config.yaml", fmt.Sprintf("--workers=%d", 1+r.IntN(16)), "--metrics-addr=:9090"},
		Ports:           []map[string]any{{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}},
		Env:             env,
		Resources:       map[string]any{"limits": map[string]string{"cpu": fmt.Sprintf("%dm", 250*(1+r.IntN(8))), "memory": fmt.Sprintf("%dMi", 128*(1+r.IntN(16)))}, "requests": map[string]string{"cpu": fmt.Sprintf("%dm", 50*(1+r.IntN(8))), "memory": fmt.Sprintf("%dMi", 64*(1+r.IntN(16)))}},
		VolumeMounts:    []map[string]any{{"name": "config", "mountPath": "/etc/" + app, "readOnly": true}, {"name": "kube-api-access-" + hexDigits(r, 5), "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}},
		LivenessProbe:   probe,
		ReadinessProbe:  probe,
		ImagePullPolicy: "IfNotPresent",
		SecurityContext: map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []string{"ALL"}}},

		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: "File",
	}
}

func makeVolumes(r *rand.Rand, app string) []map[string]any {
	return []map[string]any{
		{"name": "config", "configMap": map[string]any{"name": app + "-config", "defaultMode": 420}},
		{"name": "kube-api-access-" + hexDigits(r, 5), "projected": map[string]any{"defaultMode": 420, "sources": []map[string]any{
			{"serviceAccountToken": map[string]any{"expirationSeconds": 3607, "path": "token"}},
			{"configMap": map[string]any{"name": "kube-root-ca.crt", "items": []map[string]string{{"key": "ca.crt", "path": "ca.crt"}}}},
			{"downwardAPI": map[string]any{"items": []map[string]any{{"path": "namespace", "fieldRef": map[string]string{"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}}},
		}}},
	}
}

// makeManagedFields returns server-side apply's field ownership entries,
// the largest and most repetitive part of a real pod.
func makeManagedFields(containers int) []map[string]any {
	specFields := map[string]any{"f:containers": map[string]any{}, "f:dnsPolicy": map[string]any{}, "f:enableServiceLinks": map[string]any{}, "f:restartPolicy": map[string]any{}, "f:schedulerName": map[string]any{}, "f:securityContext": map[string]any{}, "f:terminationGracePeriodSeconds": map[string]any{}, "f:volumes": map[string]any{}}
	cs := specFields["f:containers"].(map[string]any)
	for c := range containers {
		cs[fmt.Sprintf(`k:{"name":"c%d"}`, c)] = map[string]any{".": map[string]any{}, "f:args": map[string]any{}, "f:env": map[string]any{}, "f:image": map[string]any{}, "f:imagePullPolicy": map[string]any{}, "f:livenessProbe": map[string]any{"f:httpGet": map[string]any{"f:path": map[string]any{}, "f:port": map[string]any{}}}, "f:name": map[string]any{}, "f:ports": map[string]any{}, "f:readinessProbe": map[string]any{}, "f:resources": map[string]any{"f:limits": map[string]any{}, "f:requests": map[string]any{}}, "f:securityContext": map[string]any{}, "f:volumeMounts": map[string]any{}}
	}
	statusFields := map[string]any{"f:conditions": map[string]any{}, "f:containerStatuses": map[string]any{}, "f:hostIP": map[string]any{}, "f:phase": map[string]any{}, "f:podIP": map[string]any{}, "f:podIPs": map[string]any{}, "f:startTime": map[string]any{}}
	for _, t := range []string{"ContainersReady", "Initialized", "Ready", "PodScheduled"} {
		statusFields["f:conditions"].(map[string]any)[`k:{"type":"`+t+`"}`] = map[string]any{".": map[string]any{}, "f:lastProbeTime": map[string]any{}, "f:lastTransitionTime": map[string]any{}, "f:status": map[string]any{}, "f:type": map[string]any{}}
	}
	return []map[string]any{
		{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "@CREATED@", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:generateName": map[string]any{}, "f:labels": map[string]any{}, "f:ownerReferences": map[string]any{}}, "f:spec": specFields}},
		{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "@UPDATED@", "fieldsType": "FieldsV1", "subresource": "status",
			"fieldsV1": map[string]any{"f:status": statusFields}},
		{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1", "time": "@APPLIED@", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{".": map[string]any{}, "f:kubectl.kubernetes.io/last-applied-configuration": map[string]any{}}}}},
	}
}

type pod struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       podSpec    `json:"spec"`
	Status     podStatus  `json:"status"`
}

type objectMeta struct {
	Name              string            `json:"name"`
	GenerateName      string            `json:"generateName"`
	Namespace         string            `json:"namespace"`
	UID               string            `json:"uid"`
	CreationTimestamp string            `json:"creationTimestamp"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	OwnerReferences   []map[string]any  `json:"ownerReferences"`
	ManagedFields     []map[string]any  `json:"managedFields"`
}

type podSpec struct {
	Volumes                       []map[string]any `json:"volumes"`
	Containers                    []container      `json:"containers"`
	RestartPolicy                 string           `json:"restartPolicy"`
	TerminationGracePeriodSeconds int              `json:"terminationGracePeriodSeconds"`
	DNSPolicy                     string           `json:"dnsPolicy"`
	ServiceAccountName            string           `json:"serviceAccountName"`
	NodeName                      string           `json:"nodeName"`
	SecurityContext               map[string]any   `json:"securityContext"`
	SchedulerName                 string           `json:"schedulerName"`
	Tolerations                   []map[string]any `json:"tolerations"`
	Priority                      int              `json:"priority"`
	EnableServiceLinks            bool             `json:"enableServiceLinks"`
	PreemptionPolicy              string           `json:"preemptionPolicy"`
}

type container struct {
	Name                     string           `json:"name"`
	Image                    string           `json:"image"`
	Args                     []string         `json:"args"`
	Ports                    []map[string]any `json:"ports"`
	Env                      []map[string]any `json:"env"`
	Resources                map[string]any   `json:"resources"`
	VolumeMounts             []map[string]any `json:"volumeMounts"`
	LivenessProbe            map[string]any   `json:"livenessProbe"`
	ReadinessProbe           map[string]any   `json:"readinessProbe"`
	TerminationMessagePath   string           `json:"terminationMessagePath"`
	TerminationMessagePolicy string           `json:"terminationMessagePolicy"`
	ImagePullPolicy          string           `json:"imagePullPolicy"`
	SecurityContext          map[string]any   `json:"securityContext"`
}

type podStatus struct {
	Phase             string            `json:"phase"`
	Conditions        []condition       `json:"conditions"`
	HostIP            string            `json:"hostIP"`
	PodIP             string            `json:"podIP"`
	StartTime         string            `json:"startTime"`
	ContainerStatuses []containerStatus `json:"containerStatuses"`
	QOSClass          string            `json:"qosClass"`
}

type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      any    `json:"lastProbeTime"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

type containerStatus struct {
	Name         string         `json:"name"`
	State        map[string]any `json:"state"`
	Ready        string         `json:"ready"`        // a placeholder for a JSON bool
	RestartCount string         `json:"restartCount"` // a placeholder for a JSON number
	Image        string         `json:"image"`
	ImageID      string         `json:"imageID"`
	ContainerID  string         `json:"containerID"`
	Started      bool           `json:"started"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func boolText(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func hexDigits(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

func uuid(r *rand.Rand) string {
	h := hexDigits(r, 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
