package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Row is one scenario's line in the table.
type Row struct {
	// Scenario names the fault, with its number in issue 17.
	Scenario string
	// Offered is the load offered: distinct events (or attempts, for the
	// attack rows) sent.
	Offered int
	// Acked is the deliveries answered 2xx.
	Acked int
	// Lost is the acknowledged events missing from the inbox (or from the
	// effects) at the end.
	Lost int
	// Twice is the effects applied more than once.
	Twice int
	// Stall is the longest time the scenario saw no progress (no 2xx, no
	// event done) while a fault was in force.
	Stall time.Duration
	// Recover is the longest time from the end of a fault to the first
	// progress after it.
	Recover time.Duration
	// Note says what else the scenario measured.
	Note string
	// OK is set when the scenario's assertions all held.
	OK bool
}

// Table collects rows from scenarios that run in parallel.
type Table struct {
	mu   sync.Mutex
	rows []*Row
}

// Add appends a row.
func (t *Table) Add(r *Row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

// Len returns the number of rows.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rows)
}

// Broken returns the scenarios whose row is not OK.
func (t *Table) Broken() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for _, r := range t.rows {
		if !r.OK {
			names = append(names, r.Scenario)
		}
	}
	return names
}

// Print writes the rows, ordered by scenario, as a fixed-width table.
func (t *Table) Print(w io.Writer) {
	t.mu.Lock()
	rows := append([]*Row(nil), t.rows...)
	t.mu.Unlock()
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Scenario < rows[j].Scenario })
	width := len("scenario")
	for _, r := range rows {
		width = max(width, len(r.Scenario))
	}
	line := func(cols ...string) {
		fmt.Fprintf(w, "%-*s %8s %8s %5s %5s %8s %8s  %-6s %s\n", width, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8])
	}
	line("scenario", "offered", "acked", "lost", "twice", "stall", "recover", "result", "notes")
	fmt.Fprintln(w, strings.Repeat("-", width+60))
	for _, r := range rows {
		result := "ok"
		if !r.OK {
			result = "BROKEN"
		}
		line(r.Scenario, fmt.Sprint(r.Offered), fmt.Sprint(r.Acked), fmt.Sprint(r.Lost), fmt.Sprint(r.Twice),
			seconds(r.Stall), seconds(r.Recover), result, r.Note)
	}
}

// seconds formats d for the table: "-" when nothing was measured.
func seconds(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
