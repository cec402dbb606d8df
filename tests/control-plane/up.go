package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	serviceCIDR      = "10.96.0.0/16"
	serviceIP        = "10.96.0.1"
	frontProxyClient = "front-proxy-client"
	readyTimeout     = 5 * time.Minute
)

// controllers are the kube-controller-manager controllers hpa-bridge meets: the workload
// controllers whose pods the HPA scales, the HPA itself, and what makes namespaces,
// service accounts and owner references behave as in a cluster.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"horizontal-pod-autoscaler-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
}

// layout is where `up` keeps everything under --dir.
type layout struct{ dir string }

func (l layout) pki(name string) string  { return filepath.Join(l.dir, "pki", name) }
func (l layout) path(name string) string { return filepath.Join(l.dir, name) }

// ports are picked free on 127.0.0.1 at start; a restarted component keeps its port.
type ports struct{ etcdClient, etcdPeer, apiserver, kcm int }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func pickPorts() (ports, error) {
	var p ports
	for _, slot := range []*int{&p.etcdClient, &p.etcdPeer, &p.apiserver, &p.kcm} {
		port, err := freePort()
		if err != nil {
			return p, err
		}
		*slot = port
	}
	return p, nil
}

func etcdArgs(l layout, p ports) []string {
	return []string{
		"etcd",
		"--dir", l.path("etcd"),
		"--client-port", strconv.Itoa(p.etcdClient),
		"--peer-port", strconv.Itoa(p.etcdPeer),
	}
}

func apiserverArgs(l layout, p ports) []string {
	return []string{
		"kube-apiserver",
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.etcdClient),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.apiserver),
		// 1.37 accepts a loopback advertise address only when it does not reconcile the
		// kubernetes Service's endpoints (which reject loopback addresses).
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--cert-dir=" + l.path("apiserver"),
		"--tls-cert-file=" + l.pki("apiserver.crt"),
		"--tls-private-key-file=" + l.pki("apiserver.key"),
		"--client-ca-file=" + l.pki("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + l.pki("sa.pub"),
		"--service-account-signing-key-file=" + l.pki("sa.key"),
		// The aggregator's front proxy: it authenticates to extension API servers with this
		// client certificate and names the user in these headers; the CA and names are
		// published in kube-system/extension-apiserver-authentication for them to check.
		"--requestheader-client-ca-file=" + l.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + l.pki("front-proxy-client.key"),
		"--enable-aggregator-routing=false",
		// The tests ask the API server which requests a process made and how its authorizer
		// saw them (verb, resource, subresource, name, decision), never a recording stand-in.
		"--audit-policy-file=" + l.path("audit-policy.yaml"),
		"--audit-log-path=" + l.path("logs/audit.log"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--profiling=false",
		"--v=1",
	}
}

// auditPolicy records, at Metadata level, the requests of service accounts outside
// kube-system and of users without a group of the control plane's own: the adapters and
// checkers under test. The controllers, the node stand-in and cluster-admin stay out, which
// keeps the log small. Their SubjectAccessReviews are kept with their body (Request level),
// so a test reads the exact review an adapter asked. TokenReviews stay at Metadata: their
// body is a token.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system", "system:masters", "system:nodes"]
- level: None
  users: ["system:kube-controller-manager", "system:apiserver", "system:kube-scheduler", "system:anonymous"]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*", "/api", "/apis", "/api/*", "/apis/*"]
  userGroups: ["system:authenticated"]
  verbs: ["get"]
- level: Request
  resources: [{group: authorization.k8s.io, resources: [subjectaccessreviews]}]
- level: Metadata
`

func kcmArgs(l layout, p ports) []string {
	kubeconfig := l.path("kube-controller-manager.kubeconfig")
	return []string{
		"kube-controller-manager",
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.kcm),
		"--tls-cert-file=" + l.pki("kube-controller-manager-serving.crt"),
		"--tls-private-key-file=" + l.pki("kube-controller-manager-serving.key"),
		"--controllers=" + strings.Join(controllers, ","),
		"--horizontal-pod-autoscaler-sync-period=1s",
		// At a 1 s sync every HPA costs about two requests a second on the controller's
		// client; the defaults (20/s, burst 30) would throttle the model-versus-real scenario's
		// 50 HPAs into syncs seconds apart.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--use-service-account-credentials=true",
		"--root-ca-file=" + l.pki("ca.crt"),
		"--service-account-private-key-file=" + l.pki("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		// One instance: a lost lease while etcd is down would make it exit, which a real
		// cluster's kubelet answers with a restart and this supervisor would have to mimic.
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

// runUp starts the control plane under --dir and supervises it until SIGINT or SIGTERM.
// SIGUSR1 stops etcd and SIGUSR2 starts it again on the same port and data, for tests of
// an etcd outage.
func runUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for certificates, kubeconfigs, data and logs (created)")
	exitWithStdin := fs.Bool("exit-with-stdin", false,
		"stop everything when stdin reaches end of file (a test harness holds the other end, so the control plane dies with it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	l := layout{dir: abs}
	for _, sub := range []string{"pki", "logs", "etcd", "apiserver"} {
		if err := os.MkdirAll(l.path(sub), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(l.path("audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	if err := writePKI(l.path("pki")); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	p, err := pickPorts()
	if err != nil {
		return fmt.Errorf("pick ports: %w", err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.apiserver)
	if err := writeKubeconfig(l.path("kubeconfig"), server, l.pki("ca.crt"), l.pki("admin")); err != nil {
		return err
	}
	if err := writeKubeconfig(l.path("kube-controller-manager.kubeconfig"), server, l.pki("ca.crt"),
		l.pki("kube-controller-manager")); err != nil {
		return err
	}
	if err := os.WriteFile(l.path("ports"), fmt.Appendf(nil,
		"etcd=%d\nkube-apiserver=%d\nkube-controller-manager=%d\n", p.etcdClient, p.apiserver, p.kcm), 0o600); err != nil {
		return err
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	exited := make(chan *component, 4)
	etcd := &component{name: "etcd", self: self, args: etcdArgs(l, p), logs: l.path("logs"), exited: exited}
	apiserver := &component{name: "kube-apiserver", self: self, args: apiserverArgs(l, p), logs: l.path("logs"), exited: exited}
	kcm := &component{name: "kube-controller-manager", self: self, args: kcmArgs(l, p), logs: l.path("logs"), exited: exited}
	all := []*component{etcd, apiserver, kcm}
	stopAll := func() {
		for i := len(all) - 1; i >= 0; i-- {
			all[i].stop()
		}
	}
	defer stopAll()

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	stdinClosed := make(chan struct{})
	if *exitWithStdin {
		go func() {
			_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
			close(stdinClosed)
		}()
	}

	// kube-controller-manager reads kube-system/extension-apiserver-authentication at start,
	// which RBAC lets it do only once the API server has bootstrapped its roles: it starts
	// when the API server is ready, as a kubelet's restarts would get it there in a cluster.
	for _, c := range []*component{etcd, apiserver} {
		if err := c.start(); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.path("kubeconfig"))
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runNodeStandIn(ctx, client)

	ready := make(chan error, 1)
	go func() {
		ready <- waitReady(ctx, client, l, p, func() error { return kcm.start() })
	}()
	isReady := false
	for {
		select {
		case err := <-ready:
			if err != nil {
				return fmt.Errorf("%w (logs in %s)", err, l.path("logs"))
			}
			isReady = true
			fmt.Printf("ready KUBECONFIG=%s\n", l.path("kubeconfig"))
		case c := <-exited:
			if !isReady {
				return fmt.Errorf("%s exited before the control plane was ready: see %s", c.name, c.logPath())
			}
			// A real cluster's kubelet restarts a crashed static pod; so does this supervisor.
			fmt.Fprintf(os.Stderr, "control-plane: %s exited (%s), restarting it\n", c.name, c.logPath())
			time.Sleep(time.Second)
			if err := c.start(); err != nil {
				return err
			}
		case s := <-signals:
			switch s {
			case syscall.SIGUSR1:
				fmt.Fprintln(os.Stderr, "control-plane: stopping etcd (SIGUSR1)")
				etcd.stop()
			case syscall.SIGUSR2:
				fmt.Fprintln(os.Stderr, "control-plane: starting etcd (SIGUSR2)")
				if err := etcd.start(); err != nil {
					return err
				}
			default:
				return nil
			}
		case <-stdinClosed:
			return nil
		}
	}
}

func writeKubeconfig(path, server, ca, cert string) error {
	cfg := clientcmdKubeconfig(server, ca, cert+".crt", cert+".key")
	return clientcmd.WriteToFile(*cfg, path)
}
