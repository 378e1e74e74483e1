package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Machine describes where a run happened.
type Machine struct {
	CPUs     int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	MemoryGB string `json:"memory_gib"`
	Kernel   string `json:"kernel"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute figures at the start:
	// a busy machine makes every number here smaller.
	LoadAvg  string `json:"load_average"`
	Go       string `json:"go"`
	Postgres string `json:"postgres"`
	// Settings are the server settings that move these numbers most.
	Settings map[string]string `json:"postgres_settings"`
	// Commit is the source tree measured: `git describe --always --dirty`.
	Commit string `json:"commit,omitempty"`
	// LocalServer says whether the server runs on this machine (its CPU
	// time is then reported per phase).
	LocalServer bool `json:"local_server"`
	postmaster  int
}

// serverSettings are the PostgreSQL settings recorded with each run.
var serverSettings = []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
	"shared_buffers", "max_connections", "max_wal_size", "autovacuum"}

func machineInfo(ctx context.Context, pool *pgxpool.Pool) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Settings: map[string]string{}}
	m.CPUModel = firstField("/proc/cpuinfo", "model name", ":")
	if kb, err := strconv.ParseFloat(strings.Fields(firstField("/proc/meminfo", "MemTotal", ":") + " 0")[0], 64); err == nil {
		m.MemoryGB = strconv.FormatFloat(kb/(1<<20), 'f', 1, 64)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	_ = pool.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
	for _, s := range serverSettings {
		var v string
		if err := pool.QueryRow(ctx, "SELECT current_setting($1)", s).Scan(&v); err == nil {
			m.Settings[s] = v
		}
	}
	var backend int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err == nil {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/comm")
		if st, err := readStat(backend); err == nil && strings.HasPrefix(string(comm), "postgres") {
			// A local backend: its parent is the postmaster.
			m.postmaster, m.LocalServer = st.ppid, true
		}
	}
	return m
}

// firstField returns the value of the first "key<sep>value" line of a
// /proc file.
func firstField(path, key, sep string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
