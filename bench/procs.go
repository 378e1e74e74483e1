package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of CPU times in /proc/<pid>/stat.
const clockTick = 10 * time.Millisecond

// Proc is a benchmarked subprocess: a receiver or a worker.
type Proc struct {
	// Name labels the process in the report and names its log file.
	Name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	peakRSS int64
	cpu     time.Duration
}

// startProc starts path with args and extra environment, its standard
// output and error going to dir/<name>.log.
func startProc(name, path string, args, env []string, dir string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Sample reads the process's peak RSS (VmHWM) and CPU time while it runs,
// keeping the last values read, and returns them.
func (p *Proc) Sample() (peakRSS int64, cpu time.Duration) {
	if rss, err := readVMHWM(p.Pid()); err == nil {
		p.peakRSS = max(p.peakRSS, rss)
	}
	if t, err := readCPU(p.Pid(), false); err == nil {
		p.cpu = t
	}
	return p.peakRSS, p.cpu
}

// Stop samples the process one last time, sends SIGTERM and waits up to
// timeout for it to exit, then kills it. It returns the exit error, if the
// process failed.
func (p *Proc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	p.Sample()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitError()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s; killed", p.Name, timeout)
	}
}

func (p *Proc) exitError() error {
	if p.err != nil {
		return fmt.Errorf("%s exited: %w (log: %s)", p.Name, p.err, p.tail())
	}
	return nil
}

// tail returns the end of the process's log, for error messages.
func (p *Proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n" + string(bytes.TrimSpace(b))
}

// waitReady polls url until it answers 200, the process exits, or timeout.
func (p *Proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %w (log: %s)", p.Name, p.err, p.tail())
		case <-time.After(25 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready at %s after %s (log: %s)", p.Name, url, timeout, p.tail())
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// readVMHWM returns a process's peak resident set size in bytes.
func readVMHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// procStat holds the fields of /proc/<pid>/stat the benchmark reads.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces and parentheses: skip past its end.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, errors.New("short /proc stat")
	}
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14–17.
	var s procStat
	s.ppid, _ = strconv.Atoi(f[1])
	s.utime, _ = strconv.ParseInt(f[11], 10, 64)
	s.stime, _ = strconv.ParseInt(f[12], 10, 64)
	s.cutime, _ = strconv.ParseInt(f[13], 10, 64)
	s.cstime, _ = strconv.ParseInt(f[14], 10, 64)
	return s, nil
}

// readCPU returns a process's user+system CPU time, and with children that
// of its exited, reaped children too.
func readCPU(pid int, children bool) (time.Duration, error) {
	s, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := s.utime + s.stime
	if children {
		ticks += s.cutime + s.cstime
	}
	return time.Duration(ticks) * clockTick, nil
}

// serverCPU returns the CPU time of a local PostgreSQL server: its
// postmaster and exited backends, plus every live child process. It returns
// false when the postmaster is not a local process.
func serverCPU(postmaster int) (time.Duration, bool) {
	if postmaster <= 0 {
		return 0, false
	}
	total, err := readCPU(postmaster, true)
	if err != nil {
		return 0, false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil && s.ppid == postmaster {
			total += time.Duration(s.utime+s.stime) * clockTick
		}
	}
	return total, true
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy returns the machine's total non-idle CPU time, from the first
// line of /proc/stat; 0 when unreadable.
func machineBusy() time.Duration {
	line := firstField("/proc/stat", "cpu", " ")
	var busy int64
	for i, f := range strings.Fields(line) {
		n, _ := strconv.ParseInt(f, 10, 64)
		// user nice system idle iowait irq softirq steal: skip idle and
		// iowait; guest time is already counted in user.
		if i < 8 && i != 3 && i != 4 {
			busy += n
		}
	}
	return time.Duration(busy) * clockTick
}
