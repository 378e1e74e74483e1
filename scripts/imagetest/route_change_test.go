//go:build imagetest

package imagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// takeOverTimeout bounds the new worker's wait to take over the queue from
// the old one: a rollout poll (a second) for the old one to see it waiting,
// the old one's drain, and one more for the new one to claim the queue.
const takeOverTimeout = 30 * time.Second

// TestRouteChangeRollsOutInPodman is a route change rolling out as a
// Deployment's RollingUpdate runs it, with the chart's pod specs in podman
// (issue 28): the chart is rendered with its default values (source
// stripe, routed to log) and again with testdata/route-change-values.yaml
// (a new source, billing, and its route). The old receiver and worker run
// and settle stripe deliveries; the new receiver starts beside them and
// takes a billing delivery, which the old worker, without billing's
// route, snoozes and never settles. The new worker starts beside the old
// one without the old one being stopped: it waits, unready, while the old
// one works, then takes over, and the old one stays up unready; never are
// both ready, nor two route sets working the queue. More deliveries of
// both sources are then settled, each once, by the routes of the worker
// that settled it (the log handler's line in that worker's output), and
// SIGTERM ends the four containers within their grace periods.
func TestRouteChangeRollsOutInPodman(t *testing.T) {
	t.Parallel()
	ref := image(t)
	db := dbtest.NewEmpty(t)
	ctx := context.Background()

	values, err := filepath.Abs(filepath.Join("testdata", "route-change-values.yaml"))
	require.NoError(t, err)
	oldRecvPort, oldWorkerPort, newRecvPort, newWorkerPort := freePort(t), freePort(t), freePort(t), freePort(t)
	oldRendered, from := render(t, ref, oldRecvPort, oldWorkerPort)
	require.True(t, strings.HasPrefix(from, "charts/"), "the route change needs the chart: %s", from)
	newRendered, _ := render(t, ref, newRecvPort, newWorkerPort, "-f", values)
	oldM, err := parseManifests(oldRendered)
	require.NoError(t, err)
	newM, err := parseManifests(newRendered)
	require.NoError(t, err)

	// One Secret for both releases, as an operator adds billing's key to
	// it before the upgrade.
	secrets := map[string]string{"DATABASE_URL": db.URL}
	for name := range referencedVariables(newM) { // the old one's and billing's
		if _, ok := secrets[name]; !ok {
			secrets[name] = "whsec_" + randomHex(t, 24)
		}
	}
	require.Contains(t, secrets, "BILLING_WEBHOOK_SECRET", "the route change's source reads its secret from the Secret")
	prefix := "hookinbox-rc-" + randomHex(t, 4)
	dir := t.TempDir()
	oldPods := &pods{m: oldM, secrets: map[string]map[string]string{secretName: secrets}, dir: filepath.Join(dir, "old"), prefix: prefix + "-old"}
	newPods := &pods{m: newM, secrets: map[string]map[string]string{secretName: secrets}, dir: filepath.Join(dir, "new"), prefix: prefix + "-new"}

	migrateJob, migrate, err := oldM.workload("Job", "migrate")
	require.NoError(t, err)
	oldRecvDeploy, oldRecv, err := oldM.workload("Deployment", "receiver")
	require.NoError(t, err)
	oldWorkerDeploy, oldWorker, err := oldM.workload("Deployment", "worker")
	require.NoError(t, err)
	newRecvDeploy, newRecv, err := newM.workload("Deployment", "receiver")
	require.NoError(t, err)
	newWorkerDeploy, newWorker, err := newM.workload("Deployment", "worker")
	require.NoError(t, err)

	code, out := proctest.Run(t, oldPods.command(t, "migrate", migrateJob, migrate))
	require.Equal(t, 0, code, "migration Job's container:\n%s", out)

	oldRecvProc := proctest.Start(t, oldPods.command(t, "receiver", oldRecvDeploy, oldRecv))
	oldWorkerProc := proctest.Start(t, oldPods.command(t, "worker", oldWorkerDeploy, oldWorker))
	oldReady := probeURL(t, oldWorker, oldWorker.ReadinessProbe)
	newReady := probeURL(t, newWorker, newWorker.ReadinessProbe)
	oldRecvProc.WaitUntil(t, readyTimeout, func() bool { return get(probeURL(t, oldRecv, oldRecv.ReadinessProbe)) == http.StatusOK })
	oldWorkerProc.WaitUntil(t, readyTimeout, func() bool { return get(oldReady) == http.StatusOK })

	inbox := &inboxChecker{t: t, db: db}
	deliver := func(ps *pods, name string, o *object, c *container, port int, source, id string) {
		t.Helper()
		var body string
		switch source {
		case "stripe":
			body = fmt.Sprintf(`{"id":%q,"object":"event","type":"route.change","created":%d,"data":{"object":{}}}`, id, time.Now().Unix())
		case "billing":
			body = fmt.Sprintf(`{"type":"invoice.paid","timestamp":%q,"data":{}}`, time.Now().UTC().Format(time.RFC3339))
		}
		send := []string{"/inboxctl", "send"}
		if path := configFlag(c); path != "" {
			send = append(send, "--config", path)
		}
		send = append(send, "--source", source, "--id", id, "--type", "route.change", "--data", body,
			"--url", fmt.Sprintf("http://127.0.0.1:%d", port))
		code, out := proctest.Run(t, ps.command(t, name, o, c, send...))
		require.Equal(t, 0, code, "inboxctl send %s/%s:\n%s", source, id, out)
		require.Contains(t, out, `"new":1`, "inboxctl send %s/%s", source, id)
		inbox.sent = append(inbox.sent, [2]string{source, id})
	}

	// Before: the old routes settle stripe's deliveries.
	var before []string
	for i := range 3 {
		id := fmt.Sprintf("evt_before_%d_%s", i, randomHex(t, 4))
		deliver(oldPods, fmt.Sprintf("send-before-%d", i), oldRecvDeploy, oldRecv, oldRecvPort, "stripe", id)
		before = append(before, id)
	}
	oldWorkerProc.WaitUntil(t, readyTimeout, func() bool { return inbox.done("stripe", before...) })

	// The new receiver rolls out first (its Deployment is independent) and
	// takes billing's events: the old worker does not know billing, and
	// snoozes its event rather than settle it without a route.
	newRecvProc := proctest.Start(t, newPods.command(t, "receiver", newRecvDeploy, newRecv))
	newRecvProc.WaitUntil(t, readyTimeout, func() bool { return get(probeURL(t, newRecv, newRecv.ReadinessProbe)) == http.StatusOK })
	early := "msg_early_" + randomHex(t, 4)
	deliver(newPods, "send-early", newRecvDeploy, newRecv, newRecvPort, "billing", early)
	oldWorkerProc.WaitUntil(t, readyTimeout, func() bool { return inbox.snoozed("billing", early) })
	require.False(t, inbox.done("billing", early), "the old worker settled an event of a source it has no route for")

	// The new worker starts beside the old one, which keeps running.
	startedNew := time.Now()
	newWorkerProc := proctest.Start(t, newPods.command(t, "worker", newWorkerDeploy, newWorker))
	var seen []string // the (new, old) /readyz answers, as they changed
	var last [2]int
	var readyAfter time.Duration
	deadline := startedNew.Add(takeOverTimeout)
	tick := time.NewTicker(50 * time.Millisecond) // a poll's pace
	defer tick.Stop()
	for ; ; <-tick.C {
		// The new one first: once it answers ready the old one has retired
		// (it deletes its routes record only then), so an old one ready
		// after that is two route sets working the queue.
		n := get(newReady)
		o := get(oldReady)
		if len(seen) == 0 || last != [2]int{n, o} {
			seen = append(seen, fmt.Sprintf("%d/%d", n, o))
			last = [2]int{n, o}
		}
		require.False(t, n == http.StatusOK && o == http.StatusOK, "both workers answer ready")
		require.LessOrEqual(t, inbox.workingRouteSets(), 1, "two route sets work the queue")
		if n == http.StatusOK {
			readyAfter = time.Since(startedNew)
			break
		}
		newWorkerProc.RequireRunning(t)
		oldWorkerProc.RequireRunning(t)
		require.True(t, time.Now().Before(deadline), "the new worker did not take over within %s (old /readyz %d, new %d)", takeOverTimeout, o, n)
	}
	// That it waited first is in its log (state waiting), not in a /readyz
	// answer this poll may have missed.
	require.Equal(t, http.StatusServiceUnavailable, get(oldReady), "the old worker answers ready after the new one took over")
	newWorkerProc.WaitLine(t, `"msg":"worker started"`, `"state":"waiting"`)
	newWorkerProc.WaitLine(t, "taking over: no live worker with other routes works this worker's queues any more")
	oldWorkerProc.WaitLine(t, "a newer route set waits on a queue of this worker")
	oldWorkerProc.WaitLine(t, "idle: a newer route set took over this worker's queues")
	var records int
	var routes, state string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), max(routes), max(state) FROM hookinbox_worker_routes`).Scan(&records, &routes, &state))
	require.Equal(t, 1, records, "the old worker's routes record is gone, the new one's stays")
	require.Equal(t, "working", state)
	require.Contains(t, routes, "billing", "the working routes are the new ones")
	t.Logf("new worker: ready %s after it started, the old one kept running; /readyz new/old as they changed (0: no answer yet): %s; "+
		"then the old worker: /readyz 503, idle", readyAfter.Round(time.Millisecond), strings.Join(seen, " -> "))

	// After: the new routes settle both sources, the early billing event too.
	var after []string
	for i := range 3 {
		id := fmt.Sprintf("evt_after_%d_%s", i, randomHex(t, 4))
		deliver(newPods, fmt.Sprintf("send-after-%d", i), newRecvDeploy, newRecv, newRecvPort, "stripe", id)
		after = append(after, id)
	}
	late := "msg_late_" + randomHex(t, 4)
	deliver(newPods, "send-late", newRecvDeploy, newRecv, newRecvPort, "billing", late)
	newWorkerProc.WaitUntil(t, readyTimeout, func() bool {
		return inbox.done("stripe", after...) && inbox.done("billing", early, late)
	})

	var rows, done, noted int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE note IS NOT NULL OR last_error IS NOT NULL)
FROM webhook_inbox`).Scan(&rows, &done, &noted))
	require.Equal(t, len(inbox.sent), rows)
	require.Equal(t, rows, done)
	require.Zero(t, noted, "an event was settled without a route, or failed")

	// SIGTERM to all four at once, as the rollout's end and a deletion
	// would; waited for workers first, which stop at once (the receivers
	// answer unready for shutdownDelaySeconds first).
	type running struct {
		name string
		o    *object
		proc *proctest.Process
	}
	all := []running{
		{"old worker", oldWorkerDeploy, oldWorkerProc}, {"new worker", newWorkerDeploy, newWorkerProc},
		{"old receiver", oldRecvDeploy, oldRecvProc}, {"new receiver", newRecvDeploy, newRecvProc},
	}
	start := time.Now()
	for _, r := range all {
		require.NoError(t, syscall.Kill(r.proc.PID(), syscall.SIGTERM), r.name)
	}
	for _, r := range all {
		code := r.proc.Wait(t)
		took := time.Since(start)
		grace := time.Duration(r.o.Spec.Template.Spec.grace()) * time.Second
		require.Equal(t, 0, code, "%s's exit status after SIGTERM", r.name)
		require.Less(t, took, grace, "%s ended after SIGTERM within its grace period", r.name)
		t.Logf("%s: SIGTERM ended it within %s (grace period %s)", r.name, took.Round(time.Millisecond), grace)
	}
	// Which routes ran each event is in the log handler's lines, read once
	// both workers have exited: a line reaches the test through podman
	// after its event's commit, and under load the row was seen done before
	// its line came (the test failed so here beside make test, 1 run of 9,
	// and on CI at stop 58 at the same point, 23.9 s in).
	oldLog, newLog := oldWorkerProc.Log(), newWorkerProc.Log()
	for _, ev := range inbox.sent {
		source, id := ev[0], ev[1]
		byOld, byNew := handled(t, oldLog, source, id), handled(t, newLog, source, id)
		wantOld := source == "stripe" && strings.HasPrefix(id, "evt_before_")
		if wantOld {
			require.Equal(t, [2]int{1, 0}, [2]int{byOld, byNew}, "%s/%s: handled by the old routes once", source, id)
		} else {
			require.Equal(t, [2]int{0, 1}, [2]int{byOld, byNew}, "%s/%s: handled by the new routes once", source, id)
		}
	}
	t.Logf("deliveries: %d stripe before the change, settled once each by the old worker; 1 billing taken by the new receiver before "+
		"the take-over (snoozed by the old worker) and, after it, %d stripe and 1 billing: settled once each by the new worker; "+
		"%d rows, %d done, %d with a note or error", len(before), len(after), rows, done, noted)
}

// inboxChecker reads the test database's inbox and River's jobs.
type inboxChecker struct {
	t    *testing.T
	db   *dbtest.DB
	sent [][2]string // source, event id of every delivery sent
}

// done reports whether every event of source with the ids is done.
func (c *inboxChecker) done(source string, ids ...string) bool {
	var n int
	err := c.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_inbox WHERE source = $1 AND event_id = ANY($2) AND status = 'done'`, source, ids).Scan(&n)
	return err == nil && n == len(ids)
}

// snoozed reports whether a worker fetched the event's job and snoozed it
// (River counts the snoozes in the job's metadata).
func (c *inboxChecker) snoozed(source, id string) bool {
	var n int
	err := c.db.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM river_job
WHERE args->>'source' = $1 AND args->>'event_id' = $2 AND coalesce((metadata->>'snoozes')::int, 0) > 0`, source, id).Scan(&n)
	return err == nil && n == 1
}

// workingRouteSets returns how many route sets live workers record as
// working queue default.
func (c *inboxChecker) workingRouteSets() int {
	var n int
	require.NoError(c.t, c.db.Pool.QueryRow(context.Background(), `
SELECT count(DISTINCT routes) FROM hookinbox_worker_routes WHERE queue = 'default' AND state = 'working' AND expires_at > now()`).Scan(&n))
	return n
}

// handled counts the log handler's lines for the event in a worker's
// output: how many times that worker's routes ran it.
func handled(t *testing.T, log, source, id string) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, id) {
			continue
		}
		var entry struct {
			Msg     string `json:"msg"`
			Source  string `json:"source"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "event" && entry.Source == source && entry.EventID == id {
			n++
		}
	}
	return n
}
