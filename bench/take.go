package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// The take A/B (issue 26): the same events taken, in groups, from each of
// the inbox layouts that were candidates for the worker's take, in the same
// run, interleaved, so that the choice in docs/design.md ("The take") rests
// on numbers measured side by side. Each layout is a copy of the inbox's
// columns and indexes in tables of its own (take_<layout>_*), so that the
// product's schema can change without changing what is compared.
//
// The take is what a worker's group transaction does first: lock the
// group's rows that are not done, mark them done, and return what the
// handlers need (payload, raw body, headers). Each connection runs BEGIN
// with synchronous_commit off (as the worker does), the take of a group of
// takeGroup ids, and COMMIT.

// takeGroup is the group size of the A/B: the worker's advised group.
const takeGroup = 50

// takeConns is how many connections take at once.
const takeConns = 8

// takeColumns is the inbox's narrow part: every column but the delivery's
// bytes, with the inbox's defaults.
const takeColumns = `
    id bigint PRIMARY KEY, source text NOT NULL, provider text NOT NULL, event_id text NOT NULL,
    event_type text NOT NULL DEFAULT '', status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0,
    last_error text, note text, received_at timestamptz NOT NULL, processed_at timestamptz, twin_key text,
    request_id text, attempt_errors jsonb NOT NULL DEFAULT '[]', erased_at timestamptz, held_at timestamptz`

// takeIndexes are the inbox's secondary indexes on table t; noStatus leaves
// status out of every index predicate (the HOT candidate).
func takeIndexes(t string, noStatus bool) string {
	if noStatus {
		return fmt.Sprintf(`
CREATE UNIQUE INDEX ON %[1]s (source, event_id);
CREATE UNIQUE INDEX ON %[1]s (source, twin_key) WHERE twin_key IS NOT NULL;
CREATE INDEX ON %[1]s (received_at);`, t)
	}
	return fmt.Sprintf(`
CREATE UNIQUE INDEX ON %[1]s (source, event_id);
CREATE UNIQUE INDEX ON %[1]s (source, twin_key) WHERE twin_key IS NOT NULL;
CREATE INDEX ON %[1]s (received_at) WHERE status = 'pending';
CREATE INDEX ON %[1]s (received_at);
CREATE INDEX ON %[1]s (received_at) WHERE status = 'failed';
CREATE INDEX ON %[1]s (source, id) WHERE status = 'pending' AND held_at IS NOT NULL;`, t)
}

// takeLayout is one candidate: its tables, how they are filled from
// take_src, and its take of the ids $1.
type takeLayout struct {
	name, what string
	ddl, fill  string
	take       string
	// tables are vacuumed and measured.
	tables []string
}

// takeRowCols is the narrow part's columns as filled from take_src.
const takeRowCols = `id, source, provider, event_id, event_type, received_at`

// takeSet is the done mark, as the worker's take sets it.
const takeSet = `status = 'done', processed_at = now(), attempts = taken.attempts + 1, note = NULL, last_error = NULL`

func takeLayouts() []takeLayout {
	wide := func(name, what, table string, noStatus bool, with string) takeLayout {
		return takeLayout{
			name: name, what: what, tables: []string{table},
			ddl: fmt.Sprintf(`CREATE TABLE %s (%s, payload jsonb, body bytea, headers jsonb)%s;`, table, takeColumns, with) +
				takeIndexes(table, noStatus),
			fill: fmt.Sprintf(`INSERT INTO %s (%s, payload, body, headers) SELECT %s, payload, body, headers FROM take_src`,
				table, takeRowCols, takeRowCols),
			take: fmt.Sprintf(`
WITH taken AS (
    SELECT i.id, i.attempts FROM %[1]s AS i WHERE i.id = ANY($1) AND i.status <> 'done' AND i.erased_at IS NULL
    ORDER BY i.id FOR UPDATE
)
UPDATE %[1]s AS i SET %[2]s FROM taken WHERE i.id = taken.id
RETURNING i.id, i.source, i.event_id, i.event_type, i.payload, i.body, i.headers`, table, takeSet),
		}
	}
	return []takeLayout{
		wide("wide", "today: one row, the take rewrites it whole", "take_wide", false, ""),
		wide("hot", "one row, status in no index predicate, fillfactor 50: a HOT take", "take_hot", true, " WITH (fillfactor = 50)"),
		{
			name: "split", what: "narrow row + insert-only delivery table; the take rewrites the narrow row",
			tables: []string{"take_split", "take_split_delivery"},
			ddl: `CREATE TABLE take_split (` + takeColumns + `);` + takeIndexes("take_split", false) + `
CREATE TABLE take_split_delivery (inbox_id bigint PRIMARY KEY, payload jsonb, body bytea, headers jsonb);`,
			fill: `INSERT INTO take_split (` + takeRowCols + `) SELECT ` + takeRowCols + ` FROM take_src;
INSERT INTO take_split_delivery SELECT id, payload, body, headers FROM take_src`,
			take: `
WITH taken AS (
    SELECT i.id, i.attempts FROM take_split AS i WHERE i.id = ANY($1) AND i.status <> 'done' AND i.erased_at IS NULL
    ORDER BY i.id FOR UPDATE
), marked AS (
    UPDATE take_split AS i SET ` + takeSet + ` FROM taken WHERE i.id = taken.id
    RETURNING i.id, i.source, i.event_id, i.event_type
)
SELECT m.id, m.source, m.event_id, m.event_type, d.payload, d.body, d.headers
FROM marked AS m JOIN take_split_delivery AS d ON d.inbox_id = m.id`,
		},
		{
			name: "done-insert", what: "wide row never updated; the done mark is an insert into a narrow table",
			tables: []string{"take_mark", "take_mark_done"},
			ddl: `CREATE TABLE take_mark (` + takeColumns + `, payload jsonb, body bytea, headers jsonb);` + takeIndexes("take_mark", false) + `
CREATE TABLE take_mark_done (inbox_id bigint PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());`,
			fill: `INSERT INTO take_mark (` + takeRowCols + `, payload, body, headers) SELECT ` + takeRowCols + `, payload, body, headers FROM take_src`,
			take: `
WITH marked AS (
    INSERT INTO take_mark_done (inbox_id) SELECT id FROM take_mark WHERE id = ANY($1) AND erased_at IS NULL
    ON CONFLICT DO NOTHING RETURNING inbox_id
)
SELECT i.id, i.source, i.event_id, i.event_type, i.payload, i.body, i.headers
FROM marked AS m JOIN take_mark AS i ON i.id = m.inbox_id`,
		},
	}
}

// TakeResult is one layout's take, summed over the rounds.
type TakeResult struct {
	Layout string `json:"layout"`
	What   string `json:"what"`
	Events int    `json:"events"`
	// Seconds is the wall time of its windows; EventsPerSec the events
	// taken per second of them.
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// PGMicros is the server's CPU per event taken; WALBytes its WAL.
	PGMicros float64 `json:"pg_us_per_event"`
	WALBytes float64 `json:"wal_bytes_per_event"`
	// TableBytes is the size of its tables (with indexes and TOAST) after
	// the take.
	TableBytes int64 `json:"table_bytes"`
	// LoadMicros is the server's CPU per row for filling the layout from
	// the staging table: the claim's side of the trade, roughly.
	LoadMicros float64 `json:"load_pg_us_per_event"`
}

// phaseTake runs the take A/B: n events staged once, copied into each
// layout, then taken by takeConns connections in groups of takeGroup, the
// layouts interleaved over the rounds.
func (b *bench) phaseTake(ctx context.Context) error {
	n := b.opts.TakeEvents
	pool, err := newPool(ctx, b.dbURL, takeConns+1)
	if err != nil {
		return err
	}
	defer pool.Close()
	layouts := takeLayouts()
	if err := stageTake(ctx, pool, n, layouts); err != nil {
		return err
	}
	defer dropTake(context.WithoutCancel(ctx), pool, layouts)
	results := make([]*TakeResult, len(layouts))
	for i, l := range layouts {
		results[i] = &TakeResult{Layout: l.name, What: l.what}
		before := takeCPU(b.postmaster)
		if _, err := pool.Exec(ctx, l.fill); err != nil {
			return fmt.Errorf("take %s: fill: %w", l.name, err)
		}
		results[i].LoadMicros = cpuSince(before, takeCPU(b.postmaster), int64(n)).MicrosPerEvent["postgres"]
		if err := vacuum(ctx, pool, l.tables...); err != nil {
			return err
		}
	}
	rounds := max(b.opts.Rounds, 1)
	for r := range rounds {
		lo, hi := int64(r*n/rounds)+1, int64((r+1)*n/rounds)+1
		for k := range layouts {
			i := k
			if r%2 == 1 {
				i = len(layouts) - 1 - k
			}
			if err := b.takeRound(ctx, pool, layouts[i], results[i], lo, hi); err != nil {
				return err
			}
		}
	}
	for i, l := range layouts {
		res := results[i]
		res.EventsPerSec = float64(res.Events) / res.Seconds
		res.PGMicros /= float64(res.Events)
		res.WALBytes /= float64(res.Events)
		for _, t := range l.tables {
			var size int64
			if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, t).Scan(&size); err != nil {
				return err
			}
			res.TableBytes += size
		}
		progress("   take %-12s %6.0f events/s, pg %5.0f µs/event, WAL %5.0f B/event, fill %4.0f µs/event, %s MB",
			l.name, res.EventsPerSec, res.PGMicros, res.WALBytes, res.LoadMicros, thousands(float64(res.TableBytes)/1e6))
	}
	b.report.Take = results
	return nil
}

// takeRound takes the ids [lo, hi) of layout l and adds what it cost to res.
func (b *bench) takeRound(ctx context.Context, pool *pgxpool.Pool, l takeLayout, res *TakeResult, lo, hi int64) error {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return err
	}
	var wal0, wal1 int64
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&wal0); err != nil {
		return err
	}
	groups := make(chan []int64, takeConns)
	go func() {
		defer close(groups)
		for id := lo; id < hi; id += takeGroup {
			ids := make([]int64, 0, takeGroup)
			for k := id; k < min(id+takeGroup, hi); k++ {
				ids = append(ids, k)
			}
			select {
			case groups <- ids:
			case <-ctx.Done():
				return
			}
		}
	}()
	before := takeCPU(b.postmaster)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		taken int
	)
	for range takeConns {
		wg.Go(func() {
			for ids := range groups {
				k, err := takeGroupTx(ctx, pool, l.take, ids)
				mu.Lock()
				taken += k
				if err != nil {
					errs = append(errs, fmt.Errorf("take %s: %w", l.name, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cpu := cpuSince(before, takeCPU(b.postmaster), int64(taken))
	if err := errors.Join(errs...); err != nil || cpu == nil {
		return err
	}
	if want := int(hi - lo); taken != want {
		return fmt.Errorf("take %s: took %d of %d events", l.name, taken, want)
	}
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&wal1); err != nil {
		return err
	}
	res.Events += taken
	res.Seconds += cpu.WallSeconds
	res.PGMicros += cpu.MicrosPerEvent["postgres"] * float64(taken)
	res.WALBytes += float64(wal1 - wal0)
	return nil
}

// takeGroupTx takes ids in one transaction and reports how many rows came
// back, each with its bytes.
func takeGroupTx(ctx context.Context, pool *pgxpool.Pool, take string, ids []int64) (int, error) {
	n := 0
	err := pgx.BeginTxFunc(ctx, pool, inboxstore.WorkTxOptions(true), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, take, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id                     int64
				source, evID, evType   string
				payload, body, headers []byte
			)
			if err := rows.Scan(&id, &source, &evID, &evType, &payload, &body, &headers); err != nil {
				return err
			}
			if len(body) == 0 || !json.Valid(payload) {
				return fmt.Errorf("row %d came back without its delivery", id)
			}
			n++
		}
		return rows.Err()
	})
	return n, err
}

// stageTake makes take_src, n events as the receiver stores them (ids 1…n),
// and each layout's empty tables.
func stageTake(ctx context.Context, pool *pgxpool.Pool, n int, layouts []takeLayout) error {
	dropTake(ctx, pool, layouts)
	ddl := []string{`CREATE TABLE take_src (id bigint, source text, provider text, event_id text, event_type text,
    received_at timestamptz, payload jsonb, body bytea, headers jsonb)`}
	for _, l := range layouts {
		ddl = append(ddl, l.ddl)
	}
	if _, err := pool.Exec(ctx, strings.Join(ddl, ";\n")); err != nil {
		return fmt.Errorf("take: create tables: %w", err)
	}
	now := time.Now()
	rows := make([][]any, 0, n)
	for seq := range int64(n) {
		d, err := newDelivery(fmt.Sprintf("msg_take_%09d", seq), seq, 0, now)
		if err != nil {
			return err
		}
		headers, err := json.Marshal(d.Headers)
		if err != nil {
			return err
		}
		ev := d.Events[0]
		rows = append(rows, []any{seq + 1, d.Source, d.Provider, ev.ID, ev.Type, now, string(ev.Payload), d.Body, string(headers)})
	}
	cols := []string{"id", "source", "provider", "event_id", "event_type", "received_at", "payload", "body", "headers"}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"take_src"}, cols, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("take: stage events: %w", err)
	}
	return nil
}

// dropTake drops the A/B's tables.
func dropTake(ctx context.Context, pool *pgxpool.Pool, layouts []takeLayout) {
	tables := []string{"take_src"}
	for _, l := range layouts {
		tables = append(tables, l.tables...)
	}
	_, _ = pool.Exec(ctx, `DROP TABLE IF EXISTS `+strings.Join(tables, ", "))
}

// printTake adds the A/B's rows to the table.
func (r *Report) printTake(t *table) {
	for _, res := range r.Take {
		t.row(fmt.Sprintf("take A/B: %s, groups of %d, %d conns", res.Layout, takeGroup, takeConns), thousands(res.EventsPerSec), "", "", "",
			fmt.Sprintf("pg %.0f µs/event, WAL %.0f B/event, fill %.0f µs/event, %s MB; %s", res.PGMicros, res.WALBytes,
				res.LoadMicros, thousands(float64(res.TableBytes)/1e6), res.What))
	}
}

// judgeTake adds the take's target: the layout hookinbox runs costs the
// server no more per event taken than River's burn-down costs it per job
// (its fetch and its completion, two updates of the job's row).
func (r *Report) judgeTake() {
	var split *TakeResult
	for _, res := range r.Take {
		if res.Layout == "split" {
			split = res
		}
	}
	if split == nil || r.River == nil || r.River.CPU == nil || r.River.CPU.MicrosPerEvent["postgres"] <= 0 {
		r.Targets = append(r.Targets, Target{Name: "take (split) pg µs/event ÷ River burn-down pg µs/job", Value: "—", Goal: "≤ 1×", Result: "n/a"})
		return
	}
	river := r.River.CPU.MicrosPerEvent["postgres"]
	v := split.PGMicros / river
	r.Ratios["take_split_over_river_job"] = v
	res := "FAIL"
	if v <= 1 {
		res = "PASS"
	}
	r.Targets = append(r.Targets, Target{Name: "take (split) pg µs/event ÷ River burn-down pg µs/job",
		Value: fmt.Sprintf("%.0f ÷ %.0f µs = %.2f×", split.PGMicros, river, v), Goal: "≤ 1×", Result: res})
}
