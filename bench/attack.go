package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/hookinbox/hookinbox/internal/testkit/hostile"
)

// runAttack is the attack verb: it runs one of internal/testkit/hostile's
// attacks against a running receiver while a legit client sends signed
// Stripe deliveries, and prints the legit client's success and latency,
// what the attack's requests got, and the receiver's peak RSS (VmHWM of
// --pid). scripts/attack.sh runs the five attacks of issue 10 at full size
// against a fresh bin/receiver each; see bench/README.md. It sends only to
// --addr, which must be on loopback.
//
//	hookbench attack --addr 127.0.0.1:8080 --pid PID --attack slow-body --conns 1100
func runAttack(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hookbench attack", flag.ContinueOnError)
	var (
		addr, kind, path, secret string
		pid                      int
		a                        hostile.Attack
		legit                    hostile.Legit
		warmup                   time.Duration
	)
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "the receiver's address (loopback only)")
	fs.IntVar(&pid, "pid", 0, "the receiver's process id, for its peak RSS")
	fs.StringVar(&kind, "attack", "", fmt.Sprintf("one of %v", hostile.Kinds))
	fs.StringVar(&path, "path", "/webhooks/github", "the endpoint attacked")
	fs.IntVar(&a.Conns, "conns", 100, "connections kept busy at once")
	fs.IntVar(&a.BodyBytes, "body", 500_000, "slow-body, big-body: body size")
	fs.IntVar(&a.HeaderBytes, "header", 1<<20, "big-header: header line size")
	fs.IntVar(&a.Rate, "rate", 10, "slow-body: bytes per second per connection")
	fs.IntVar(&a.MaxRequests, "max-requests", 1000, "bound on each connection's requests")
	fs.StringVar(&legit.URL, "legit-url", "", "the legit client's Stripe endpoint (default http://ADDR/webhooks/stripe)")
	fs.StringVar(&secret, "secret", "whsec_attack", "the Stripe source's secret")
	fs.IntVar(&legit.Count, "legit-count", 300, "legit deliveries sent")
	fs.DurationVar(&legit.Every, "legit-every", 100*time.Millisecond, "time between legit deliveries")
	fs.DurationVar(&legit.Timeout, "legit-timeout", 10*time.Second, "bound on one legit delivery")
	fs.StringVar(&legit.From, "legit-from", hostile.LegitAddr, "the legit client's local address; "+hostile.AttackerAddr+
		" (the attackers') makes it a client the receiver cannot tell from them, as behind a proxy it does not trust")
	fs.DurationVar(&warmup, "warmup", 2*time.Second, "time the attack runs before the legit client starts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %s: hookbench attack only attacks loopback addresses", addr)
	}
	if ip := net.ParseIP(legit.From); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--legit-from %s: must be a loopback address", legit.From)
	}
	if a.Kind, err = parseKind(kind); err != nil {
		return err
	}
	a.Addr, a.Path, legit.Secret = addr, path, secret
	if legit.URL == "" {
		legit.URL = "http://" + addr + "/webhooks/stripe"
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	attacked := make(chan *hostile.Result, 1)
	go func() { attacked <- a.Run(ctx, ready) }()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the attack's connections did not open within 2 minutes")
	}
	select {
	case <-time.After(warmup): // let the attack reach its full weight
	case <-ctx.Done():
	}
	start := time.Now()
	lr := legit.Run(ctx)
	elapsed := time.Since(start)
	cancel()
	ar := <-attacked
	fmt.Printf("attack %s, %d connections, %s\n", a.Kind, a.Conns, ar)
	fmt.Printf("%s from %s, over %s\n", lr, legit.From, elapsed.Round(time.Millisecond))
	if pid != 0 {
		hwm, err := hostile.PeakRSS(pid)
		if err != nil {
			return err
		}
		fmt.Printf("receiver peak RSS %d MiB\n", hwm>>20)
	}
	return nil
}

// parseKind returns the attack named s.
func parseKind(s string) (hostile.Kind, error) {
	for _, k := range hostile.Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown attack %q (want one of %v)", s, hostile.Kinds)
}
