package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is a certificate authority generated at start; nothing outlives the directory.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// certSpec names a leaf certificate: its subject, and for a server its loopback names.
type certSpec struct {
	commonName string
	orgs       []string
	dnsNames   []string
	ips        []net.IP
	server     bool
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newAuthority makes a self-signed CA and writes NAME.crt and NAME.key into dir.
func newAuthority(dir, name string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePair(dir, name, der, key); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// issue signs a leaf certificate and writes NAME.crt and NAME.key into dir.
func (a *authority) issue(dir, name string, spec certSpec) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if spec.server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return fmt.Errorf("sign %s: %w", name, err)
	}
	return writePair(dir, name, der, key)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// writeServiceAccountKeys writes the key pair that signs and verifies service-account tokens.
func writeServiceAccountKeys(dir string) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pubDER)
}

// writePKI generates everything the control plane authenticates with, under dir/pki:
//   - ca: signs the API server's serving certificate and every client certificate;
//   - front-proxy-ca: signs only the aggregator's proxy client certificate, as
//     --requestheader-client-ca-file demands of a real cluster;
//   - sa.key/sa.pub: the service-account token keys;
//   - unprivileged: a client certificate from ca for a user no RBAC names.
func writePKI(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newAuthority(dir, "ca")
	if err != nil {
		return err
	}
	frontProxy, err := newAuthority(dir, "front-proxy-ca")
	if err != nil {
		return err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP(serviceIP)}
	leaves := []struct {
		by   *authority
		name string
		spec certSpec
	}{
		{ca, "apiserver", certSpec{
			commonName: "kube-apiserver",
			dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			ips:        loopback,
			server:     true,
		}},
		{ca, "kube-controller-manager-serving", certSpec{
			commonName: "kube-controller-manager",
			dnsNames:   []string{"localhost"},
			ips:        loopback,
			server:     true,
		}},
		{ca, "admin", certSpec{commonName: "kubernetes-admin", orgs: []string{"system:masters"}}},
		{ca, "kube-controller-manager", certSpec{commonName: "system:kube-controller-manager"}},
		// A cluster user with no RBAC at all, so a test can tell whose identity an adapter
		// believed when this certificate arrives carrying a privileged user's headers.
		{ca, "unprivileged", certSpec{commonName: "hpa-bridge-test-unprivileged"}},
		{frontProxy, "front-proxy-client", certSpec{commonName: frontProxyClient}},
	}
	for _, l := range leaves {
		if err := l.by.issue(dir, l.name, l.spec); err != nil {
			return err
		}
	}
	return writeServiceAccountKeys(dir)
}
