package kubetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"
)

// This file mirrors the setup of k8s.io/apiserver's
// pkg/storage/etcd3/store_test.go (testSetup, checkStorageInvariants,
// compactStorage, increaseRVFunc), with the embedded etcd replaced by the
// server TestMain started, and each test's keys under a prefix of its own
// (the tests share one server).

var scheme = runtime.NewScheme()
var codecs = serializer.NewCodecFactory(scheme)

const defaultTestPrefix = "test!"

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
}

// under is the server TestMain started.
var under *servers

func TestMain(m *testing.M) {
	s, err := startServers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		os.Exit(1)
	}
	under = s
	code := m.Run()
	if s.prober != nil && s.prober.stop() != 0 {
		code = 1
	}
	if s.killed != nil {
		// The run must have lived through the kill and the restart.
		select {
		case name := <-s.killed:
			fmt.Fprintf(os.Stderr, "kubetest: %s was killed and restarted during the run\n", name)
		case <-time.After(2 * time.Minute):
			fmt.Fprintln(os.Stderr, "kubetest: the run ended before a member was killed: set a shorter "+killAfterEnv)
			code = 1
		}
	}
	s.stop(code != 0)
	os.Exit(code)
}

// testPrefixes numbers the tests' key prefixes.
var testPrefixes atomic.Int64

// setupOptions are etcd3's testSetup options that the tests here use.
type setupOptions struct {
	codec runtime.Codec
	// on is the server the store is a client of; nil is under.
	on *servers
}

type setupOption func(*setupOptions)

func withCodec(codec runtime.Codec) setupOption {
	return func(o *setupOptions) { o.codec = codec }
}

// onServers sets the store up on s instead of the servers TestMain
// started.
func onServers(s *servers) setupOption {
	return func(o *setupOptions) { o.on = s }
}

// testStore is k8s.io/apiserver's etcd3 store over a client of the server
// under test, with what the tests reach into: its transformer, which can
// be swapped (UpdatePrefixTransformer, UpdateTransformer), its client, and
// its key prefix.
type testStore struct {
	storage.Interface
	// compactRevision is the store's CompactRevision.
	compactRevision func() int64
	// sizeEstimation is the store's EnableResourceSizeEstimation.
	sizeEstimation func(storage.KeysFunc) error
	codec          runtime.Codec
	transformer    *swappableTransformer
	prefix         *storagetesting.PrefixTransformer
	client         *kubernetes.Client
	pathPrefix     string
}

func (s *testStore) CompactRevision() int64 { return s.compactRevision() }

// UpdatePrefixTransformer is etcd3's storeWithPrefixTransformer.
func (s *testStore) UpdatePrefixTransformer(modifier storagetesting.PrefixTransformerModifier) func() {
	copied := *s.prefix
	return s.transformer.swap(modifier(&copied))
}

// UpdateTransformer is etcd3's storeWithTransformerOverride.
func (s *testStore) UpdateTransformer(modifier storagetesting.TransformerModifier) func() {
	return s.transformer.swap(modifier(s.transformer.current()))
}

// swappableTransformer is the transformer the store is built with: etcd3's
// tests replace the store's transformer field, which this package cannot
// reach, so the store's transformer delegates to one that can be replaced.
type swappableTransformer struct {
	mu    sync.RWMutex
	inner value.Transformer
}

func (t *swappableTransformer) current() value.Transformer {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.inner
}

// swap installs next and returns the function that restores the previous.
func (t *swappableTransformer) swap(next value.Transformer) func() {
	t.mu.Lock()
	orig := t.inner
	t.inner = next
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.inner = orig
		t.mu.Unlock()
	}
}

func (t *swappableTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	return t.current().TransformFromStorage(ctx, data, dataCtx)
}

func (t *swappableTransformer) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	return t.current().TransformToStorage(ctx, data, dataCtx)
}

// newClient is etcd3 testserver.RunEtcd's client, with its recorders, on
// the servers s (over their TLS, if any).
func newClient(t testing.TB, s *servers) *kubernetes.Client {
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:   s.endpoints,
		DialTimeout: 10 * time.Second,
		TLS:         s.tls,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	kubernetesRecorder := storagetesting.NewKubernetesRecorder(client.Kubernetes)
	client.KV = storagetesting.NewKVRecorder(client.KV, kubernetesRecorder)
	client.Kubernetes = kubernetesRecorder
	return client
}

// testSetup is etcd3's testSetup: a store of pods ("/pods/") with a
// prefix transformer, under a key prefix of this test's own.
func testSetup(t testing.TB, opts ...setupOption) (context.Context, *testStore, *kubernetes.Client) {
	o := setupOptions{codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion), on: under}
	for _, opt := range opts {
		opt(&o)
	}
	client := newClient(t, o.on)
	prefix := storagetesting.NewPrefixTransformer([]byte(defaultTestPrefix), false)
	transformer := &swappableTransformer{inner: prefix}
	versioner := storage.APIObjectVersioner{}
	compactor := etcd3.NewCompactor(client.Client, 0, clock.RealClock{}, nil)
	t.Cleanup(compactor.Stop)
	leaseConfig := etcd3.NewDefaultLeaseManagerConfig()
	// As etcd3's tests: 1s, below the tests' 30s timeouts.
	leaseConfig.ReuseDurationSeconds = 1
	pathPrefix := fmt.Sprintf("/kubetest-%d-%d", os.Getpid(), testPrefixes.Add(1))
	s, err := etcd3.New(client, compactor, o.codec, newPod, newPodList, pathPrefix, "/pods/",
		schema.GroupResource{Resource: "pods"}, transformer, leaseConfig, etcd3.NewDefaultDecoder(o.codec, versioner), versioner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return context.Background(), &testStore{
		Interface: s, compactRevision: s.CompactRevision, sizeEstimation: s.EnableResourceSizeEstimation,
		codec: o.codec, transformer: transformer, prefix: prefix, client: client, pathPrefix: pathPrefix,
	}, client
}

func newPod() runtime.Object     { return &example.Pod{} }
func newPodList() runtime.Object { return &example.PodList{} }

// etcdKey is the key the store keeps key under.
func (s *testStore) etcdKey(key string) string { return path.Join(s.pathPrefix, key) }

// checkStorageInvariants is etcd3's: what the store wrote for key is the
// prefixed encoding of the object, without resource version or selfLink.
func checkStorageInvariants(s *testStore) storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		getResp, err := s.client.KV.Get(ctx, s.etcdKey(key))
		if err != nil {
			t.Fatalf("etcdClient.KV.Get failed: %v", err)
		}
		if len(getResp.Kvs) == 0 {
			t.Fatalf("expecting non empty result on key: %s", key)
		}
		decoded, err := runtime.Decode(s.codec, getResp.Kvs[0].Value[len(defaultTestPrefix):])
		if err != nil {
			t.Fatalf("expecting successful decode of object from %v\n%v", err, string(getResp.Kvs[0].Value))
		}
		obj := decoded.(*example.Pod)
		if obj.ResourceVersion != "" {
			t.Errorf("stored object should have empty resource version")
		}
		if obj.SelfLink != "" {
			t.Errorf("stored output should have empty selfLink")
		}
	}
}

// compactStorage is etcd3's: compact the server at resourceVersion through
// etcd3.Compact (as the apiserver's compactor does), and with
// ListFromCacheSnapshot wait until the store saw it.
func compactStorage(s *testStore, client *clientv3.Client) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		versioner := storage.APIObjectVersioner{}
		rv, err := versioner.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		// etcd3's tries Compact at the compact key's version 0 and retries
		// on an error only, as each of its tests has a new server; here
		// the key has the version earlier tests left, which a failed
		// compare returns (with no error): try again at that version.
		var version int64
		for attempt := 0; ; attempt++ {
			v, _, compacted, err := etcd3.Compact(ctx, client, version, int64(rv))
			if err == nil && compacted == int64(rv) {
				break
			}
			if attempt == 2 {
				t.Fatalf("compacting at %d: %v (compact key at version %d)", rv, err, v)
			}
			version = v
		}
		if utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot) {
			deadline := time.Now().Add(30 * time.Second)
			for s.CompactRevision() != int64(rv) {
				if time.Now().After(deadline) {
					t.Fatalf("the store did not see compaction at %d within 30s (it has %d)", rv, s.CompactRevision())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// increaseRVFunc is etcd3's: a write outside the store's keys.
func increaseRVFunc(client *clientv3.Client) storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := client.KV.Put(ctx, "increaseRV", "ok")
		if err != nil {
			t.Fatalf("Could not update increaseRV: %v", err)
		}
		return resp.Header.Revision
	}
}

// resetFeatureSupportCheckerDuringTest is etcd3's.
func resetFeatureSupportCheckerDuringTest(t *testing.T) {
	t.Helper()
	orig := etcdfeature.DefaultFeatureSupportChecker
	etcdfeature.DefaultFeatureSupportChecker = etcdfeature.NewDefaultFeatureSupportChecker()
	t.Cleanup(func() { etcdfeature.DefaultFeatureSupportChecker = orig })
}
