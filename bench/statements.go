package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// With --statements, hookbench splits PostgreSQL's side of chosen windows by
// statement: pg_stat_statements is reset when a window starts and read when
// it ends. The server must load the extension
// (shared_preload_libraries = 'pg_stat_statements'; see bench/profiles).
// exec and plan times are wall time summed over the calls, so on a shared
// machine they include waiting for a core: read them as shares.

// Statement is one statement's share of a window.
type Statement struct {
	Calls  int64   `json:"calls"`
	Rows   int64   `json:"rows"`
	ExecMs float64 `json:"exec_ms"`
	PlanMs float64 `json:"plan_ms"`
	Query  string  `json:"query"`
}

// StatementWindow is the statements of one window, busiest first, with the
// events the window processed.
type StatementWindow struct {
	Window     string      `json:"window"`
	Events     int64       `json:"events"`
	Statements []Statement `json:"statements"`
}

// statementsStart resets pg_stat_statements for a window, when asked to.
func (b *bench) statementsStart(ctx context.Context) error {
	if !b.opts.Statements {
		return nil
	}
	if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Errorf("--statements: %w", err)
	}
	if _, err := b.pool.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return fmt.Errorf("--statements: %w", err)
	}
	return nil
}

// statementsEnd reads the window's statements into the report.
func (b *bench) statementsEnd(ctx context.Context, window string, events int64) error {
	if !b.opts.Statements {
		return nil
	}
	rows, err := b.pool.Query(ctx, `
SELECT calls, rows, total_exec_time, total_plan_time, left(regexp_replace(query, '\s+', ' ', 'g'), 140)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'
ORDER BY total_exec_time + total_plan_time DESC
LIMIT 12`)
	if err != nil {
		return fmt.Errorf("--statements: %w", err)
	}
	defer rows.Close()
	w := StatementWindow{Window: window, Events: events}
	for rows.Next() {
		var s Statement
		if err := rows.Scan(&s.Calls, &s.Rows, &s.ExecMs, &s.PlanMs, &s.Query); err != nil {
			return fmt.Errorf("--statements: %w", err)
		}
		w.Statements = append(w.Statements, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("--statements: %w", err)
	}
	b.report.Statements = append(b.report.Statements, w)
	return nil
}

// printStatements writes each window's statements: their calls, rows, time,
// and time per event of the window.
func (r *Report) printStatements(w io.Writer) {
	for _, sw := range r.Statements {
		fmt.Fprintf(w, "\nstatements of %s (%d events): calls, rows, exec ms, plan ms, µs per event\n", sw.Window, sw.Events)
		t := &table{w: w}
		t.header("calls", "rows", "exec ms", "plan ms", "µs/event", "statement")
		for _, s := range sw.Statements {
			per := ""
			if sw.Events > 0 {
				per = fmt.Sprintf("%.1f", (s.ExecMs+s.PlanMs)*1000/float64(sw.Events))
			}
			t.row(thousands(float64(s.Calls)), thousands(float64(s.Rows)), fmt.Sprintf("%.0f", s.ExecMs), fmt.Sprintf("%.0f", s.PlanMs), per,
				strings.TrimSpace(s.Query))
		}
		t.flush()
	}
}
