package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestReceiverSIGKILL is scenario 1: three receivers behind a load
// generator that sends round-robin; one of them is SIGKILLed and restarted
// again and again. The generator retries every delivery that got no answer
// or a non-2xx, as a provider does. Every delivery answered 2xx must be in
// the inbox, every delivery ends up there exactly once, and a ledger
// worker applies each deposit once.
//
// The kills follow the load, not the clock: kill k comes once k/(kills+1)
// of the deliveries are acknowledged, while the generator holds an attempt
// to the receiver killed half-written (Sender.Hold), so that each kill
// lands on a receiver at work by construction.
func TestReceiverSIGKILL(t *testing.T) {
	t.Parallel()
	row := record(t, "1 receiver SIGKILL under load")
	began := time.Now()
	db := ledgerDB(t)
	const receivers = 3
	n, kills := size(600, 6000), size(3, 15)
	configs := make([]string, receivers)
	procs := make([]*proctest.Process, receivers)
	targets := make([]string, receivers)
	for i := range receivers {
		configs[i] = setup{DB: db.URL, Listen: freePort(t)}.write(t)
		procs[i], targets[i] = startReceiver(t, configs[i])
	}
	worker, _ := startWorker(t, configs[0])
	t.Logf("%s: daemons up", time.Since(began))

	ds := faults.Deposits("r", n, 7)
	sender := &faults.Sender{Targets: targets, Secret: secret, Workers: 6}
	ctx, cancel := context.WithTimeout(context.Background(), size(2*time.Minute, 8*time.Minute))
	defer cancel()
	reports := make(chan *faults.Report, 1)
	go func() { reports <- sender.Run(ctx, ds) }()

	for k := range kills {
		slot := k % receivers
		threshold := int64((k + 1) * n / (kills + 1))
		held, release := sender.Hold(threshold, slot)
		select {
		case <-held:
		case <-ctx.Done():
			t.Fatalf("kill %d: no attempt to receiver %d after %d acks before the deadline", k, slot, threshold)
		}
		killed := time.Now()
		procs[slot].Kill(t)
		release()
		procs[slot], _ = startReceiver(t, configs[slot])
		row.Recover = max(row.Recover, time.Since(killed))
	}
	t.Logf("%s: kills done", time.Since(began))
	rep := <-reports
	t.Logf("%s: all acked", time.Since(began))
	require.Len(t, rep.Acks, n, "deliveries acknowledged before the deadline (failed attempts: %v)", rep.Answers)
	row.Offered, row.Acked, row.Stall = n, len(rep.Acks), rep.LongestGap

	waitDone(t, worker, db.Pool, n, 2*time.Minute)
	t.Logf("%s: all done", time.Since(began))
	o := check(t, db.Pool, ds, rep.Acks)
	row.Lost, row.Twice = o.lost(), o.twice()
	for _, b := range rep.Bodies[:min(3, len(rep.Bodies))] {
		t.Logf("a refusal: %s", b)
	}
	row.Note = fmt.Sprintf("%d kills; failed attempts retried: %v", kills, rep.Answers)
	texts := map[string]string{"worker log": worker.Log()}
	for i, p := range procs {
		texts[fmt.Sprintf("receiver %d log", i)] = p.Log()
	}
	for i, b := range rep.Bodies {
		texts[fmt.Sprintf("error body %d", i)] = b
	}
	noSecrets(t, []string{secret, secret[len("whsec_"):]}, texts)
}
