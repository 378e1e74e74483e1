package hostile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind names an attack.
type Kind string

// The attacks, one per row of issue 10's table.
const (
	// SlowBody opens Conns connections that each announce a BodyBytes
	// body and send it at Rate bytes/s.
	SlowBody Kind = "slow-body"
	// BigBody sends Conns unsigned BodyBytes bodies at once, again and
	// again (chunked, so that no Content-Length warns the receiver).
	BigBody Kind = "big-body"
	// BigHeader sends Conns requests whose one header line is HeaderBytes
	// long, again and again.
	BigHeader Kind = "big-header"
	// Idle opens Conns keep-alive connections, sends one request on each,
	// and leaves them open.
	Idle Kind = "idle"
	// Flood sends unsigned deliveries from Conns keep-alive connections as
	// fast as they are answered.
	Flood Kind = "flood"
)

// Kinds are the attacks in the table's order.
var Kinds = []Kind{SlowBody, BigBody, BigHeader, Idle, Flood}

// Attack is one attack on a receiver.
type Attack struct {
	Kind Kind
	// Addr is the receiver's host:port; Path the endpoint attacked.
	Addr, Path string
	// Conns is the number of connections kept busy at once.
	Conns int
	// BodyBytes, HeaderBytes and Rate size the attack (see the kinds).
	BodyBytes, HeaderBytes int
	Rate                   int
	// MaxRequests bounds the requests of each connection's loop.
	MaxRequests int
}

// Result counts what the attack's requests got.
type Result struct {
	Requests atomic.Int64
	// Answers counts status codes; Errors, connections that ended without
	// an answer (closed, reset). Hold the lock to read them while the
	// attack runs.
	sync.Mutex
	Answers map[int]int
	Errors  map[string]int
	// Open is the number of idle connections the receiver still kept open
	// when the attack ended, as a read at that moment finds them.
	Open atomic.Int64
}

func (r *Result) String() string {
	r.Lock()
	defer r.Unlock()
	return fmt.Sprintf("%d requests, answers %v, errors %v, idle connections still open %d", r.Requests.Load(), r.Answers, r.Errors, r.Open.Load())
}

func (r *Result) record(status int, err error) {
	r.Lock()
	defer r.Unlock()
	if err != nil {
		r.Errors[errorKind(err)]++
		return
	}
	r.Answers[status]++
}

// Run runs the attack until ctx ends or every connection's loop has run
// MaxRequests times. ready is closed once every connection has been opened
// (or failed to open) once, so that a caller can start measuring under
// the attack's full weight.
func (a *Attack) Run(ctx context.Context, ready chan<- struct{}) *Result {
	res := &Result{Answers: map[int]int{}, Errors: map[string]int{}}
	pad := strings.Repeat("a", a.HeaderBytes) // built once, not per request
	var wg, opened sync.WaitGroup
	opened.Add(a.Conns)
	for range a.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(opened.Done)
			defer once()
			for range max(1, a.MaxRequests) {
				if ctx.Err() != nil {
					return
				}
				a.one(ctx, res, pad, once)
				if a.Kind == Idle {
					return
				}
			}
		}()
	}
	go func() { opened.Wait(); close(ready) }()
	wg.Wait()
	return res
}

// Launch runs the attack in the background, like Run, and returns once
// every connection has been opened once, with the channel its Result
// arrives on; or ctx's error if ctx ends first (the Result still arrives,
// once the attack has stopped).
func (a *Attack) Launch(ctx context.Context) (<-chan *Result, error) {
	ready := make(chan struct{})
	out := make(chan *Result, 1)
	go func() { out <- a.Run(ctx, ready) }()
	select {
	case <-ready:
		return out, nil
	case <-ctx.Done():
		return out, ctx.Err()
	}
}

// one runs one request of the attack on a new connection; pad is
// BigHeader's header value.
func (a *Attack) one(ctx context.Context, res *Result, pad string, opened func()) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", a.Addr)
	if err != nil {
		opened()
		res.record(0, err)
		return
	}
	defer conn.Close()
	// When ctx ends, every read and write fails at once; cut is closed
	// once the deadline is set.
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Now())
		close(cut)
	})
	defer stop()
	res.Requests.Add(1)
	w := bufio.NewWriterSize(conn, 64<<10)
	head := "POST " + a.Path + " HTTP/1.1\r\nHost: " + a.Addr + "\r\nContent-Type: application/json\r\n"
	switch a.Kind {
	case SlowBody:
		fmt.Fprintf(w, "%sContent-Length: %d\r\n\r\n", head, a.BodyBytes)
		err = w.Flush()
		opened()
		err = trickle(ctx, conn, a.BodyBytes, a.Rate, err)
	case BigBody:
		fmt.Fprintf(w, "%sTransfer-Encoding: chunked\r\n\r\n", head)
		opened()
		err = sendChunked(w, a.BodyBytes)
	case BigHeader:
		fmt.Fprintf(w, "%sX-Pad: %s\r\nContent-Length: 2\r\n\r\n{}", head, pad)
		opened()
		err = w.Flush()
	case Idle, Flood:
		fmt.Fprintf(w, "%sContent-Length: 2\r\nStripe-Signature: t=1,v1=00\r\n\r\n{}", head)
		err = w.Flush()
		opened() // a connection left in the backlog may never be answered
	}
	br := bufio.NewReader(conn)
	status, rerr := readAnswer(br)
	res.record(status, cmpErr(rerr, err, status))
	switch a.Kind {
	case Idle:
		if rerr == nil {
			idle(ctx, conn, br, cut, res)
		}
	case Flood:
		for i := 1; i < max(1, a.MaxRequests) && rerr == nil && ctx.Err() == nil; i++ {
			fmt.Fprintf(w, "%sContent-Length: 2\r\nStripe-Signature: t=1,v1=00\r\n\r\n{}", head)
			if err := w.Flush(); err != nil {
				res.record(0, err)
				return
			}
			res.Requests.Add(1)
			status, rerr = readAnswer(br)
			res.record(status, rerr)
		}
	}
}

// idle keeps conn open until the receiver closes it or ctx ends; then it
// counts conn in Open if the receiver still has it open. That is asked of
// the socket once ctx has ended (a read that finds the receiver's FIN
// returns at once), not of when this goroutine last ran.
func idle(ctx context.Context, conn net.Conn, br *bufio.Reader, cut <-chan struct{}, res *Result) {
	_, _ = br.ReadByte() // returns when the receiver closes, or ctx ends
	if ctx.Err() == nil {
		return // closed by the receiver
	}
	<-cut // ctx's deadline is set and will not move the probe's
	_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		res.Open.Add(1)
	}
}

// cmpErr is the error that explains a missing answer.
func cmpErr(readErr, writeErr error, status int) error {
	if status != 0 {
		return nil
	}
	if readErr != nil {
		return readErr
	}
	return writeErr
}

// trickle writes n bytes at rate bytes/s, in tenths of a second.
func trickle(ctx context.Context, conn net.Conn, n, rate int, err error) error {
	if err != nil {
		return err
	}
	per := max(1, rate/10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	chunk := []byte(strings.Repeat("x", per))
	for sent := 0; sent < n; sent += per {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if _, err := conn.Write(chunk[:min(per, n-sent)]); err != nil {
			return err
		}
	}
	return nil
}

// sendChunked writes an n-byte body in 64 KiB chunks and flushes.
func sendChunked(w *bufio.Writer, n int) error {
	chunk := strings.Repeat("x", 64<<10)
	for sent := 0; sent < n; sent += len(chunk) {
		c := chunk[:min(len(chunk), n-sent)]
		if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(c), c); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, "0\r\n\r\n"); err != nil {
		return err
	}
	return w.Flush()
}

// readAnswer reads one response and its body.
func readAnswer(br *bufio.Reader) (int, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// PeakRSS returns the peak resident set size of process pid, in bytes.
func PeakRSS(pid int) (int64, error) {
	return procStatus(pid, "VmHWM:")
}

func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}
