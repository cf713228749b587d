// Package apiserver starts a real kube-apiserver on an embedded etcd for
// the tests of this module, both torn down when the test ends.
package apiserver

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Server is a kube-apiserver backed by an embedded etcd, both torn down
// when the test ends.
type Server struct {
	// Admin is a loopback configuration with every right (system:masters).
	Admin  *rest.Config
	Client kubernetes.Interface
}

// startEtcd starts an embedded etcd on loopback ports with its data in
// t.TempDir() and returns its client URL.
func startEtcd(t testing.TB) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "etcd")
	cfg.LogLevel = "error"
	client, peer := freeLoopbackURL(t), freeLoopbackURL(t)
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		t.Fatalf("embedded etcd not ready after 60s")
	}
	return client.String()
}

func freeLoopbackURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("free port %s: %v", addr, err)
	}
	return url.URL{Scheme: "http", Host: addr}
}

// quietKlog keeps the API server's informational log (thousands of lines
// a test) off stderr, where it buried which test failed; its errors still
// go there.
var quietKlog = sync.OnceFunc(func() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "ERROR")
	klog.SetOutput(io.Discard)
})

// Start starts etcd and a kube-apiserver with RBAC authorization.
func Start(t testing.TB) *Server {
	t.Helper()
	quietKlog()
	etcdURL := startEtcd(t)
	storage := storagebackend.NewDefaultConfig(fmt.Sprintf("/registry-%d", time.Now().UnixNano()), nil)
	storage.Transport.ServerList = []string{etcdURL}
	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	opts.DisableInvariantChecks = true
	srv, err := kubeapiservertesting.StartTestServer(t, opts, []string{"--authorization-mode=RBAC"}, storage)
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(srv.TearDownFn)
	client, err := kubernetes.NewForConfig(srv.ClientConfig)
	if err != nil {
		t.Fatalf("client for the test API server: %v", err)
	}
	return &Server{Admin: srv.ClientConfig, Client: client}
}
