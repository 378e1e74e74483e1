package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Report is everything one run measured; it is printed as a table and
// written as JSON.
type Report struct {
	Mode         string             `json:"mode"`
	StartedAt    time.Time          `json:"started_at"`
	Seconds      float64            `json:"seconds"`
	Machine      Machine            `json:"machine"`
	Options      map[string]any     `json:"options"`
	PhaseSeconds map[string]float64 `json:"phase_seconds"`

	Ceiling     []*CeilingResult `json:"a_ceiling"`
	PerRequest  *ReceiverRun     `json:"b_per_request,omitempty"`
	GroupCommit *ReceiverRun     `json:"c_group_commit,omitempty"`
	Duplicates  *DupResult       `json:"d_duplicates,omitempty"`
	River       *RiverResult     `json:"e_river,omitempty"`
	// RiverAsWorker is River's burn-down with the worker's own settings
	// (its default concurrency and fetch cooldown).
	RiverAsWorker *RiverResult   `json:"e_river_as_worker,omitempty"`
	Drains        []*DrainResult `json:"e_drains"`
	Take          []*TakeResult  `json:"take_ab,omitempty"`
	// Statements splits PostgreSQL's side of some windows by statement
	// (--statements).
	Statements []StatementWindow  `json:"statements,omitempty"`
	Steady     *SteadyResult      `json:"f_steady,omitempty"`
	Storms     []*StormResult     `json:"storm,omitempty"`
	Fair       *FairResult        `json:"fair,omitempty"`
	PeakRSS    map[string]float64 `json:"g_peak_rss_mb"`
	Scale      *ScaleResult       `json:"scale,omitempty"`
	HTTPTotals HTTPTotals         `json:"http_totals"`

	Ratios  map[string]float64 `json:"ratios"`
	Targets []Target           `json:"targets"`
	Errors  []string           `json:"errors,omitempty"`
}

func newReport(o *options) *Report {
	mode := "full"
	switch {
	case len(o.Phases) < len(allPhases):
		mode = "partial"
	case o.Quick:
		mode = "quick"
	}
	return &Report{
		Mode: mode, StartedAt: time.Now().UTC(), PhaseSeconds: map[string]float64{}, PeakRSS: map[string]float64{},
		Ratios: map[string]float64{},
		Options: map[string]any{
			"warmup": o.Warmup.String(), "window": o.Window.String(), "clients": o.Clients,
			"ceiling_conc": o.CeilingConc, "per_request_conns": o.PerRequestConns, "drain_events": o.DrainEvents,
			"river_jobs": o.RiverJobs, "steady_window": o.SteadyWindow.String(), "steady_fraction": o.SteadyFraction, "steady_inflight": o.SteadyInflight,
			"scale_rows": o.ScaleRows, "ack_timeout": ackTimeout.String(),
			"rounds": o.Rounds, "drain_deadline": o.DrainDeadline.String(), "max_requests": o.MaxRequests,
			"storm_deliveries": o.StormDeliveries, "storm_fraction": o.StormFraction, "storm_deadline": o.StormDeadline.String(),
		},
	}
}

// HTTPFigures are one HTTP load's results.
type HTTPFigures struct {
	Clients       int              `json:"clients"`
	Rate          float64          `json:"open_loop_rate,omitempty"`
	WindowSeconds float64          `json:"window_seconds"`
	Requests      int64            `json:"requests"`
	OK            int64            `json:"ok"`
	NewPerSec     float64          `json:"new_per_sec"`
	OKPerSec      float64          `json:"ok_per_sec"`
	New           int64            `json:"new"`
	Duplicates    int64            `json:"duplicates"`
	Latency       Summary          `json:"ack_latency"`
	Status        map[string]int64 `json:"status"`
	Non2xx        int64            `json:"non_2xx"`
	Errors        int64            `json:"errors"`
	OverAck       int64            `json:"over_ack_timeout"`
	Late          int64            `json:"sent_late,omitempty"`
	FirstError    string           `json:"first_error,omitempty"`
	CPU           *CPUUse          `json:"cpu,omitempty"`
}

func figures(clients int, rate float64, r *LoadResult, cpu *CPUUse) *HTTPFigures {
	f := &HTTPFigures{
		Clients: clients, Rate: rate, WindowSeconds: r.Window.Seconds(), Requests: r.Requests,
		NewPerSec: r.NewPerSec(), OKPerSec: r.OKPerSec(), New: r.New, Duplicates: r.Duplicates,
		Latency: r.Latency.Summary(), Status: map[string]int64{}, Non2xx: r.Non2xx(), Errors: r.Errors,
		OverAck: r.OverAck, Late: r.Late, FirstError: r.FirstError, CPU: cpu, OK: r.OK(),
	}
	for code, n := range r.Status {
		f.Status[strconv.Itoa(code)] = n
	}
	return f
}

// HTTPTotals sums the failures of every HTTP load of the run.
type HTTPTotals struct {
	Requests int64 `json:"requests"`
	OverAck  int64 `json:"over_ack_timeout"`
	Non2xx   int64 `json:"non_2xx"`
	Errors   int64 `json:"errors"`
}

func (t *HTTPTotals) add(r *LoadResult) {
	t.Requests += r.Requests
	t.OverAck += r.OverAck
	t.Non2xx += r.Non2xx()
	t.Errors += r.Errors
}

// ReceiverRun is a receiver measured at one client and at many.
type ReceiverRun struct {
	Config    string       `json:"config"`
	One       *HTTPFigures `json:"one_client"`
	Many      *HTTPFigures `json:"many_clients"`
	PeakRSSMB float64      `json:"peak_rss_mb"`
}

func (pc procConfig) describe() string {
	if pc.BatchMaxEvents == 0 && pc.BatchFlushers == 0 && pc.MaxConns == 0 {
		r := defaults.Receiver
		return fmt.Sprintf("defaults: batch_max_events %d, batch_max_wait %s, batch_flushers %d, max_conns %d",
			r.MaxEvents, r.MaxWait, r.Flushers, defaults.Database.MaxConns)
	}
	return fmt.Sprintf("batch_max_events %d, batch_flushers %d, max_conns %d", pc.BatchMaxEvents, pc.BatchFlushers, pc.MaxConns)
}

// DupResult is measurement (d).
type DupResult struct {
	Storm          *HTTPFigures `json:"storm"`
	StormDupPerSec float64      `json:"storm_duplicates_per_sec"`
	Mix            *HTTPFigures `json:"mix"`
	MixNewPerSec   float64      `json:"mix_new_per_sec"`
	MixDupPerSec   float64      `json:"mix_duplicates_per_sec"`
	MixNewLatency  Summary      `json:"mix_new_latency"`
	MixDupLatency  Summary      `json:"mix_duplicate_latency"`
	ExtraRows      int64        `json:"extra_rows"`
	ExtraJobs      int64        `json:"extra_jobs"`
	CountsExact    bool         `json:"counts_exact"`
}

// DrainResult is one worker drain of measurement (e).
type DrainResult struct {
	Handler string `json:"handler"`
	Workers int    `json:"workers"`
	// Concurrency and MaxConns are the worker's settings (0: the defaults).
	Concurrency int `json:"concurrency,omitempty"`
	MaxConns    int `json:"max_conns,omitempty"`
	// GroupMaxEvents is worker.group_max_events (0: the default).
	GroupMaxEvents int `json:"group_max_events,omitempty"`
	// Accounts is how many ledger accounts the deposits credit (0: 10,000).
	Accounts     int     `json:"accounts,omitempty"`
	Events       int     `json:"events"`
	Done         int64   `json:"done"`
	Failed       int64   `json:"failed"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// DeadlineHit says the drain was cut off at --drain-deadline:
	// EventsPerSec is then the rate until the deadline.
	DeadlineHit bool    `json:"deadline_hit"`
	PreloadSecs float64 `json:"preload_seconds"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	CPU         *CPUUse `json:"cpu,omitempty"`
}

// SteadyResult is measurement (f).
type SteadyResult struct {
	Fraction float64 `json:"fraction"`
	// Max is the maximum the load is a fraction of, and Basis how it was
	// found (see phaseSteady).
	Max                float64      `json:"max"`
	Basis              string       `json:"basis"`
	Rate               float64      `json:"rate"`
	Ack                *HTTPFigures `json:"ack"`
	Accepted           int64        `json:"accepted"`
	Done               int64        `json:"done"`
	Drained            bool         `json:"drained"`
	AgeP50Ms           float64      `json:"age_p50_ms"`
	AgeP99Ms           float64      `json:"age_p99_ms"`
	AgeMaxMs           float64      `json:"age_max_ms"`
	DrainAfterLoadSecs float64      `json:"drain_after_load_seconds"`
}

// ScaleResult is (c) measured again over a full inbox.
type ScaleResult struct {
	Rows       int     `json:"rows"`
	CopySecs   float64 `json:"copy_seconds"`
	SettleSecs float64 `json:"vacuum_seconds"`
	TableBytes int64   `json:"table_bytes"`
	// Empty is (c) on an empty inbox in a second database, the reference;
	// Full is (c) with the rows in place. Their slices were interleaved.
	Empty *ReceiverRun `json:"empty"`
	Full  *ReceiverRun `json:"full"`
}

// write saves the report as JSON: latest.json (quick-latest.json for a
// quick run, partial-latest.json when phases were left out) and a
// timestamped copy.
func (r *Report) write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	prefix := ""
	if r.Mode != "full" {
		prefix = r.Mode + "-"
	}
	paths := []string{
		filepath.Join(dir, prefix+"latest.json"),
		filepath.Join(dir, prefix+r.StartedAt.Format("20060102T150405Z")+".json"),
	}
	for _, p := range paths {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// finish judges, prints and writes the report.
func (b *bench) finish() error {
	r := b.report
	r.Seconds = time.Since(r.StartedAt).Seconds()
	r.judge()
	r.print(os.Stdout)
	paths, err := r.write(b.opts.Results)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	fmt.Printf("\nresults: %s\n", strings.Join(paths, ", "))
	if len(r.Errors) > 0 {
		return fmt.Errorf("%d phase(s) failed", len(r.Errors))
	}
	return nil
}
