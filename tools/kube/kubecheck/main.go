// Command kubecheck is the Kubernetes client of scripts/kube-test.sh (kubectl is not
// installed): it makes the test cluster's certificates and kubeconfig, waits for the API
// server, applies manifests with server-side apply, dry-runs rendered manifests with
// fieldValidation=Strict, and watches that a Helm pre-install/pre-upgrade hook Job
// completes before the release's Deployments are created or changed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `usage: kubecheck COMMAND [flags] [args]

commands:
  ports N                      print N free loopback TCP ports, one a line
  certs -dir D -server URL     write a CA, serving/admin certificates, a service-account key and D/kubeconfig
  ready                        wait until the API server's /readyz answers ok
  apply FILE...                server-side apply every object (CRDs: wait until Established)
  wait-nodes N                 wait until N nodes are Ready
  wait-sa NAME                 wait until the namespace has ServiceAccount NAME (made by the controller manager)
  dryrun FILE...               server-side dry-run create of every object with fieldValidation=Strict
  hook-order -phase P          watch the namespace; exit 0 once a completed hook Job precedes the first
                               Deployment creation (P=install) or spec change (P=upgrade), 1 otherwise
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "kubecheck %s: %v\n", os.Args[1], err)
		stop()
		os.Exit(1)
	}
}

// common holds the flags every command that talks to the API server takes.
type common struct {
	kubeconfig string
	namespace  string
	timeout    time.Duration
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG)")
	fs.StringVar(&c.namespace, "namespace", "default", "namespace of namespaced objects that name none")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var c common
	switch cmd {
	case "ports":
		return cmdPorts(args)
	case "certs":
		dir := fs.String("dir", "", "directory to write into")
		server := fs.String("server", "", "API server URL for the kubeconfig")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return cmdCerts(*dir, *server)
	case "ready", "apply", "wait-nodes", "wait-sa", "dryrun":
		c.register(fs)
		if err := fs.Parse(args); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		cl, err := newClients(c.kubeconfig)
		if err != nil {
			return err
		}
		switch cmd {
		case "ready":
			return cmdReady(ctx, cl)
		case "apply":
			return cmdApply(ctx, cl, c.namespace, fs.Args())
		case "wait-nodes":
			return cmdWaitNodes(ctx, cl, fs.Args())
		case "wait-sa":
			return cmdWaitServiceAccount(ctx, cl, c.namespace, fs.Args())
		default:
			return cmdDryRun(ctx, cl, c.namespace, fs.Args())
		}
	case "hook-order":
		c.register(fs)
		phase := fs.String("phase", "install", "install or upgrade")
		if err := fs.Parse(args); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		cl, err := newClients(c.kubeconfig)
		if err != nil {
			return err
		}
		return cmdHookOrder(ctx, cl, c.namespace, *phase)
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
