package receiver

import (
	"errors"
	"io"
	"net/http"
	"time"
)

var (
	errTooLarge = errors.New("body too large")
	// errBudget: the unverified-body budget has no room for the body.
	errBudget = errors.New("unverified-body budget exhausted")
	// errTooSlow: the body arrived slower than the minimum rate.
	errTooSlow = errors.New("body arrived too slowly")
	// errCut: the body was cut to make room for another (see
	// unverified.cutSlowest).
	errCut = errors.New("body cut to make room in the unverified-body budget")
)

// chunkStep is the least a body of unknown length grows by.
const chunkStep = 32 << 10

// bodyReader reads a request body under the receiver's budgets.
type bodyReader struct {
	r  *http.Request
	rc *http.ResponseController
	// hold accounts for the body and sets its read deadlines.
	hold  *hold
	limit int64
	// ackDeadline is the source's ack deadline, the latest any read may end.
	ackDeadline time.Time
	// The body must arrive at rate bytes/s after grace, counted from begin.
	begin time.Time
	grace time.Duration
	rate  int64
}

// deadline is the time by which the first n bytes must have arrived.
func (b *bodyReader) deadline(n int64) time.Time {
	d := b.begin.Add(b.grace + time.Duration(float64(n)/float64(b.rate)*float64(time.Second)))
	if d.After(b.ackDeadline) {
		return b.ackDeadline
	}
	return d
}

// read reads the body whole. A Content-Length over the limit is refused
// unread; a known length is reserved from the budget before the first byte
// is read, a chunked body in steps as it grows. Each read extends the read
// deadline by what the minimum rate allows for the bytes so far. A body
// cut to make room for another ends with errCut.
func (b *bodyReader) read() ([]byte, error) {
	buf, err := b.readAll()
	if err != nil && b.hold.wasCut() {
		return nil, errCut
	}
	return buf, err
}

func (b *bodyReader) readAll() ([]byte, error) {
	cl := b.r.ContentLength
	if cl > b.limit {
		return nil, errTooLarge
	}
	var buf []byte
	if cl >= 0 {
		if !b.hold.reserve(cl, time.Now()) {
			return nil, errBudget
		}
		buf = make([]byte, 0, cl)
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > b.limit || (cl >= 0 && int64(len(buf)) == cl) {
				break
			}
			grow := min(max(int64(cap(buf)), chunkStep), b.limit+1-int64(cap(buf)))
			if !b.hold.reserve(grow, time.Now()) {
				return nil, errBudget
			}
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		d := b.deadline(int64(len(buf)))
		if !b.hold.setReadDeadline(d) {
			return nil, errCut
		}
		n, err := b.r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		b.hold.received(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if d.Before(b.ackDeadline) && !time.Now().Before(d) {
				return nil, errTooSlow
			}
			return nil, err
		}
	}
	// The body is in: it can no longer be cut, and its deadline is
	// cleared. net/http's background read, which now waits for the next
	// request, would otherwise fail at it and cancel the connection's
	// context, and with it this request's commit (which its own context
	// bounds by the ack deadline).
	if !b.hold.finish() {
		return nil, errCut
	}
	_ = b.rc.SetReadDeadline(time.Time{})
	if int64(len(buf)) > b.limit {
		return nil, errTooLarge
	}
	return buf, nil
}
