// Command demo is what `make demo` runs: it starts hookinbox's receiver and
// the ledger worker as real processes against DATABASE_URL, sends them a
// burst of signed deliveries (new events, duplicates, concurrent retries of
// one event, a forged signature, a poison event and an unparseable one),
// waits until every event is settled, prints a summary and stops everything.
// The worker serves River UI meanwhile: the demo prints its address and
// credentials, and with --hold keeps both processes running after the
// summary until Ctrl-C, to look at the poison event there.
//
//	demo --bin bin [--hold]
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// secret is the demo bank's Standard Webhooks signing secret.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" //nolint:gosec // G101: the demo's public test secret

func main() {
	bin := flag.String("bin", "bin", "folder holding the receiver and ledger binaries")
	deposits := flag.Int("deposits", 200, "distinct deposits to send")
	hold := flag.Bool("hold", false, "keep the receiver and worker running after the summary, until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, *bin, *deposits, *hold)
	stop() // before os.Exit, which skips deferred calls
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, deposits int, hold bool) error {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		return fmt.Errorf("DATABASE_URL is not set (run it with `make demo`)")
	}
	dir, err := os.MkdirTemp("", "hookinbox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	receiverAddr, workerAddr := freeAddr(), freeAddr()
	configPath := filepath.Join(dir, "demo.yaml")
	uiPassword := rand.Text()
	fd, err := startFeed()
	if err != nil {
		return err
	}
	defer fd.stop()
	if err := os.WriteFile(configPath, []byte(fmt.Sprintf(demoConfig, receiverAddr, workerAddr, secret, uiUser, uiPassword, fd.url)), 0o600); err != nil {
		return err
	}

	step("1. migrate (core, River and ledger migrations)")
	migrate := exec.CommandContext(ctx, filepath.Join(bin, "ledger"), "migrate", "--config", configPath)
	migrate.Stdout, migrate.Stderr = os.Stdout, os.Stderr
	if err := migrate.Run(); err != nil {
		return fmt.Errorf("ledger migrate: %w", err)
	}

	step("2. start the receiver and the ledger worker")
	logPath := filepath.Join(dir, "processes.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	procs := []*exec.Cmd{}
	defer func() { stopAll(procs) }()
	for _, name := range []string{"receiver", "ledger"} {
		cmd := exec.Command(filepath.Join(bin, name), "--config", configPath)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		procs = append(procs, cmd)
	}
	for _, addr := range []string{receiverAddr, workerAddr} {
		if err := waitReady(ctx, "http://"+addr+"/readyz"); err != nil {
			return fmt.Errorf("%w (process logs: %s)", err, dumpLog(logPath))
		}
	}
	fmt.Printf("   receiver on %s, ledger worker on %s\n", receiverAddr, workerAddr)
	fmt.Printf("   River UI:  http://%s/riverui/  (user %s, password %s)\n", workerAddr, uiUser, uiPassword)
	fmt.Printf("   metrics:   http://%s/metrics and http://%s/metrics\n", receiverAddr, workerAddr)

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	step("3. send a burst of signed deliveries")
	b := newBurst("http://"+receiverAddr+"/webhooks/bank", deposits)
	if err := b.send(ctx); err != nil {
		return err
	}

	step("4. wait until every event is settled")
	if err := waitSettled(ctx, pool, b.runID); err != nil {
		return err
	}

	if err := waitFed(ctx, pool, b.runID); err != nil {
		return err
	}

	step("5. summary")
	ok, err := summarize(ctx, pool, b)
	if err != nil {
		return err
	}
	fed, err := summarizeFeed(ctx, pool, fd, b.runID)
	if err != nil {
		return err
	}
	ok = ok && fed

	// The poison event fails permanently, so its job is cancelled; the
	// unparseable one never had a job.
	fmt.Printf("\n   The poison event's job is in River UI, with its error:\n     http://%s/riverui/jobs?state=cancelled  (user %s, password %s)\n", workerAddr, uiUser, uiPassword)
	// The config is deleted when the demo returns: name it only while held.
	if hold {
		fmt.Printf("   The unparseable one has no job: bin/inboxctl events list --status failed --config %s\n", configPath)
		fmt.Println("   holding the receiver and worker up: press Ctrl-C to stop")
		<-ctx.Done()
	} else {
		fmt.Println("   The unparseable one has no job: `inboxctl events list --status failed` shows it.")
		fmt.Println("   (run `make demo DEMO_FLAGS=--hold` to keep them up and look; it prints the config to pass)")
	}

	step("6. stop everything (SIGTERM: soft stop, then hard)")
	stopAll(procs)
	procs = nil
	if !ok {
		return fmt.Errorf("the ledger does not match what was sent (process logs: %s)", dumpLog(logPath))
	}
	return nil
}

const demoConfig = `
database: {url: "${DATABASE_URL}"}
log: {level: warn}
receiver: {listen: %q}
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%[3]q]}
worker:
  listen: %[2]q
  concurrency: 8
  max_attempts: 3
  routes:
    - {source: bank, types: ["account.deposit"], handlers: [ledger], destinations: [feed]}
  destinations:
    feed: {kind: http, url: %[6]q, secret: %[3]q, backoff_min: 100ms, backoff_max: 1s}
  outbox:
    relay: {poll_interval: 100ms}
  ui:
    enabled: true
    basic_auth: [{username: %[4]q, password: %[5]q}]
`

// uiUser is the demo's River UI user; its password is made for each run.
const uiUser = "demo"

func step(s string) { fmt.Printf("\n== %s\n", s) }

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s never became ready", url)
}

func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			fmt.Printf("   %s stopped (%v)\n", filepath.Base(p.Path), exitText(err))
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			fmt.Printf("   %s killed after 30s\n", filepath.Base(p.Path))
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func dumpLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "\n" + string(b)
}
