package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func clientcmdKubeconfig(server, ca, cert, key string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["control-plane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["control-plane"] = &clientcmdapi.Context{Cluster: "control-plane", AuthInfo: "user", Namespace: "default"}
	cfg.CurrentContext = "control-plane"
	return cfg
}

// waitReady returns once the API server is ready (then calls apiserverReady), kube-controller-manager is healthy (its
// /healthz includes each controller's check), the service-account controllers have acted in
// the default namespace, and the stand-in's Node is Ready.
func waitReady(ctx context.Context, client kubernetes.Interface, l layout, p ports, apiserverReady func() error) error {
	deadline := time.Now().Add(readyTimeout)
	ca, err := os.ReadFile(l.pki("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	kcm := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	checks := []struct {
		what string
		ok   func() error
	}{
		{"kube-apiserver /readyz", func() error {
			_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}},
		{"kube-controller-manager /healthz", func() error {
			resp, err := kcm.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", p.kcm))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", resp.Status, body)
			}
			return nil
		}},
		{"a token for the default service account", func() error {
			_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		}},
		{"the Ready node " + nodeName, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("not Ready yet")
			}
			return nil
		}},
	}
	for i, c := range checks {
		if i == 1 {
			if err := apiserverReady(); err != nil {
				return err
			}
		}
		var last error
		for {
			if last = c.ok(); last == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("waiting for %s: %v", c.what, last)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
