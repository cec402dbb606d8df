// Command control-plane runs a real Kubernetes 1.37 control plane on loopback for hpa-bridge's
// tests and demo: embedded etcd, kube-apiserver (with its aggregator) and
// kube-controller-manager, each a child process of `control-plane up`, plus a scheduler and
// kubelet stand-in. See README.md.
package main

import (
	"fmt"
	"os"

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

const usage = `usage: control-plane COMMAND [ARGS]

  up --dir DIR             start etcd, kube-apiserver, kube-controller-manager and the
                           scheduler/kubelet stand-in; print "ready KUBECONFIG=DIR/kubeconfig"
  etcd --dir DIR --client-port P --peer-port Q
  kube-apiserver ARGS      the upstream kube-apiserver command
  kube-controller-manager ARGS
                           the upstream kube-controller-manager command
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "up":
		err = runUp(args)
	case "etcd":
		err = runEtcd(args)
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		err = cmd.Execute()
	case "kube-controller-manager":
		cmd := kcm.NewControllerManagerCommand()
		cmd.SetArgs(args)
		err = cmd.Execute()
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "control-plane: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "control-plane %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
