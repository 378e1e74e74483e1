package faults_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/faults"
)

// The soak's sources: both Standard Webhooks, each with its own secret, both
// routed to the ledger.
var soakSources = []string{"bank", "shop"}

// soakSecrets are the sources' signing secrets, in soakSources' order.
var soakSecrets = []string{secret, "whsec_c2hvcHNlY3JldHNob3BzZWNyZXRzaG9wc2Vj"}

// The accounts a deposit goes to: the deposits to slowAccount's accounts
// (acc_slow_0 …, one each, so that they never queue past job_timeout on
// one row) sleep in their handler (see soakTrigger); a deposit to no account is poison (the ledger
// fails it permanently).
const (
	slowAccount = "acc_slow"
	slowSleep   = 3 * time.Second
	soakAccount = 5 // acc_0 … acc_4
)

// stepKind names what a step does.
type stepKind string

const (
	stepSend     stepKind = "send"      // deliver Deposits, each as many times as Copies says, at once
	stepKill     stepKind = "kill"      // SIGKILL a process
	stepRestart  stepKind = "restart"   // start the killed process again
	stepTerm     stepKind = "terminate" // pg_terminate_backend of Picks' backends
	stepPause    stepKind = "pause"     // inboxctl sources pause
	stepResume   stepKind = "resume"    // inboxctl sources resume
	receiverRole          = "receiver"
	workerRole            = "worker"
)

// step is one timed entry of a soak schedule.
type step struct {
	At   time.Duration // from the schedule's start
	Kind stepKind
	// Source is a send's, a pause's or a resume's source.
	Source string
	// What describes a send ("new", "race", "late", "poison", "slow").
	What string
	// Deposits are a send's events; Copies is how many times each is
	// delivered at once (2 for racing duplicates).
	Deposits []faults.Deposit
	Copies   int
	// Role and Index name a killed or restarted process.
	Role  string
	Index int
	// Picks choose a terminate's backends among those connected, by
	// position modulo their count.
	Picks []uint64
}

// String is the step as the schedule prints it.
func (s *step) String() string {
	head := fmt.Sprintf("%7.2fs %-9s", s.At.Seconds(), s.Kind)
	switch s.Kind {
	case stepSend:
		first, last := s.Deposits[0].ID, s.Deposits[len(s.Deposits)-1].ID
		return fmt.Sprintf("%s %s %-6s %d events ×%d (%s … %s)", head, s.Source, s.What, len(s.Deposits), s.Copies, first, last)
	case stepRollout, stepRetire, stepCutOff, stepReconnect:
		return strings.TrimRight(fmt.Sprintf("%s routes %d %s", head, s.Index, s.What), " ")
	case stepKill, stepRestart:
		return fmt.Sprintf("%s %s %d", head, s.Role, s.Index)
	case stepTerm:
		return fmt.Sprintf("%s %d backends (picks %v)", head, len(s.Picks), s.Picks)
	default:
		if tr := trafficString(s); tr != "" {
			return fmt.Sprintf("%s %s", head, tr)
		}
		return fmt.Sprintf("%s %s", head, opString(s))
	}
}

// schedule is a soak's steps, in time order, drawn from its seed.
type schedule struct {
	Seed     uint64
	Duration time.Duration
	Steps    []step
	// Poison are the event ids the schedule made poison, by source.
	Poison map[string]map[string]bool
}

// String prints the schedule, one step a line.
func (s *schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak schedule: seed %d, duration %s, %d steps\n", s.Seed, s.Duration, len(s.Steps))
	for i := range s.Steps {
		fmt.Fprintf(&b, "  %3d %s\n", i, &s.Steps[i])
	}
	return b.String()
}

// soakProcesses is how many receivers and how many workers a soak runs.
const soakProcesses = 2

// A schedule plays its generators (traffic, faults, PostgreSQL restarts,
// rollouts, scenes) at their full rate for its first soakFullRate, and
// past it with soakThinning times the time between two of each. At the
// full rate the two workers cannot keep up for long: seed 101's 30-minute
// schedule sent 1,300 events a minute (a third of them during PostgreSQL
// restarts, every 12 s), the scenes whose handlers sleep held 9.5 of the
// 16 slots on average and the groups they sit in more, a restart or a
// rollout every few seconds stalled the rest, and the workers settled 600
// a minute; 25 minutes in, 15,000 events waited, far past what the quiet
// tail can drain. Thinning the sleeping scenes alone still left the
// backlog growing by 270 a minute. A short schedule is a burst the tail
// drains; a long one has to be a load the workers carry. Every schedule of
// up to soakFullRate is as it was, step for step.
const (
	soakFullRate = 2 * time.Minute
	soakThinning = 3
)

// thinned is gap, the time from a generator's step to its next, made
// soakThinning times longer when the step comes past soakFullRate (at is
// the step's time).
func thinned(at, gap time.Duration) time.Duration {
	if at < soakFullRate {
		return gap
	}
	return soakThinning * gap
}

// newSchedule draws a schedule of the given duration from seed: the same
// seed and duration give the same schedule. Traffic runs on every source
// throughout; faults and pauses are spread over it; every killed process is
// restarted and every pause resumed before the end.
func newSchedule(seed uint64, duration time.Duration) *schedule {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	s := &schedule{Seed: seed, Duration: duration, Poison: map[string]map[string]bool{}}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	end := duration - 2*time.Second
	// Traffic: a send every 0.5 to 2.5 s per source.
	for _, src := range soakSources {
		s.Poison[src] = map[string]bool{}
		var sent []faults.Deposit
		n := 0
		for at := between(0, time.Second); at < end; at += thinned(at, between(500*time.Millisecond, 2500*time.Millisecond)) {
			fresh := func(count int, account func(i int) string) []faults.Deposit {
				ds := make([]faults.Deposit, count)
				for i := range ds {
					ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_%05d", src, n), Account: account(i), Cents: int64(100 + rng.IntN(10000)), Version: int64(n + 1)}
					n++
				}
				sent = append(sent, ds...)
				return ds
			}
			st := step{At: at, Kind: stepSend, Source: src, Copies: 1}
			switch k := rng.IntN(10); {
			case k < 5:
				st.What, st.Deposits = "new", fresh(5+rng.IntN(16), func(int) string { return fmt.Sprintf("acc_%d", rng.IntN(soakAccount)) })
			case k < 7:
				st.What, st.Copies = "race", 2
				st.Deposits = fresh(3+rng.IntN(6), func(int) string { return fmt.Sprintf("acc_%d", rng.IntN(soakAccount)) })
			case k < 9 && len(sent) > 0:
				st.What = "late"
				for range 3 + rng.IntN(6) {
					st.Deposits = append(st.Deposits, sent[rng.IntN(len(sent))])
				}
			default:
				st.What, st.Deposits = "poison", fresh(1+rng.IntN(2), func(int) string { return "" })
				for _, d := range st.Deposits {
					s.Poison[src][d.ID] = true
				}
			}
			s.Steps = append(s.Steps, st)
			// Now and then, a pause scene: slow events, a burst behind them
			// (fetched, waiting for a transaction), then the pause.
			if rng.IntN(12) == 0 && at+15*time.Second < end {
				slow := step{At: at + 100*time.Millisecond, Kind: stepSend, Source: src, What: "slow", Copies: 1,
					Deposits: fresh(soakProcesses*workerConcurrency, func(i int) string { return fmt.Sprintf("%s_%d", slowAccount, i) })}
				burst := step{At: at + 200*time.Millisecond, Kind: stepSend, Source: src, What: "new", Copies: 1,
					Deposits: fresh(40, func(int) string { return fmt.Sprintf("acc_%d", rng.IntN(soakAccount)) })}
				pause := at + between(700*time.Millisecond, 1500*time.Millisecond)
				resume := pause + between(4*time.Second, 10*time.Second)
				s.Steps = append(s.Steps, slow, burst,
					step{At: pause, Kind: stepPause, Source: src}, step{At: resume, Kind: stepResume, Source: src})
				at = resume
			}
		}
	}
	// Faults: one every 3 to 10 s, never two kills of one process at once.
	downUntil := map[string]time.Duration{}
	for at := between(3*time.Second, 8*time.Second); at < end-5*time.Second; at += thinned(at, between(3*time.Second, 10*time.Second)) {
		if rng.IntN(3) == 0 {
			st := step{At: at, Kind: stepTerm}
			for range 1 + rng.IntN(3) {
				st.Picks = append(st.Picks, rng.Uint64N(1000))
			}
			s.Steps = append(s.Steps, st)
			continue
		}
		role := []string{receiverRole, workerRole}[rng.IntN(2)]
		index := rng.IntN(soakProcesses)
		key := fmt.Sprint(role, index)
		if downUntil[key] > at {
			continue
		}
		back := at + between(200*time.Millisecond, 3*time.Second)
		downUntil[key] = back
		s.Steps = append(s.Steps, step{At: at, Kind: stepKill, Role: role, Index: index},
			step{At: back, Kind: stepRestart, Role: role, Index: index})
	}
	s.addOps(rng, end)
	s.addStrayScene()
	s.addLostMarkScene(end)
	addWorkerSteps(s)
	addTrafficSteps(s)
	addOutboxSteps(s)
	slices.SortStableFunc(s.Steps, func(a, b step) int { return cmp.Compare(a.At, b.At) })
	return s
}
