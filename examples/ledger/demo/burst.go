package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hookinbox/hookinbox/internal/webhook"
)

const accounts = 5

// burst sends the demo's deliveries and tallies the receiver's answers.
type burst struct {
	url      string
	runID    string
	deposits int
	// expected cents per account, from the distinct valid deposits.
	expected map[string]int64

	mu         sync.Mutex
	sent       int
	statuses   map[int]int
	new, dupes int
}

func newBurst(url string, deposits int) *burst {
	return &burst{
		url: url, runID: fmt.Sprintf("demo%d", time.Now().UnixNano()), deposits: deposits,
		expected: map[string]int64{}, statuses: map[int]int{},
	}
}

func (b *burst) account(i int) string { return fmt.Sprintf("%s_acc_%d", b.runID, i%accounts) }
func (b *burst) eventID(i int) string { return fmt.Sprintf("%s_msg_%04d", b.runID, i) }

func depositBody(account string, amount string) []byte {
	return []byte(fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":%q,"amount":%q}}`, account, amount))
}

func (b *burst) send(ctx context.Context) error {
	// Distinct deposits, eight senders at a time.
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := b.deposit(ctx, i, b.eventID(i), secret); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range b.deposits {
		cents := int64(100 + i*7)
		b.expected[b.account(i)] += cents
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("   %d distinct deposits sent\n", b.deposits)

	// Provider retries: every fifth deposit again, with a fresh signature.
	for i := 0; i < b.deposits; i += 5 {
		if err := b.deposit(ctx, i, b.eventID(i), secret); err != nil {
			return err
		}
	}
	fmt.Printf("   %d retries of delivered events sent\n", (b.deposits+4)/5)

	// A retry storm: one new event delivered 20 times at once.
	storm := b.deposits
	b.expected[b.account(storm)] += 100 + int64(storm)*7
	var swg sync.WaitGroup
	for range 20 {
		swg.Add(1)
		go func() {
			defer swg.Done()
			_ = b.deposit(ctx, storm, b.eventID(storm), secret)
		}()
	}
	swg.Wait()
	fmt.Println("   1 event delivered 20 times concurrently")

	// A forged delivery: signed with the wrong secret.
	_ = b.post(ctx, b.runID+"_forged", depositBody(b.account(0), "1000000.00"), "whsec_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	// A poison event: authentic, but its amount can never be applied.
	_ = b.post(ctx, b.runID+"_poison", depositBody(b.account(1), "twelve"), secret)
	// An authentic delivery that is not JSON at all.
	_ = b.post(ctx, b.runID+"_garbage", []byte("\x00not json"), secret)
	fmt.Println("   1 forged, 1 poison and 1 unparseable delivery sent")
	return nil
}

func (b *burst) deposit(ctx context.Context, i int, eventID, key string) error {
	cents := int64(100 + i*7)
	return b.post(ctx, eventID, depositBody(b.account(i), fmt.Sprintf("%d.%02d", cents/100, cents%100)), key)
}

func (b *burst) post(ctx context.Context, eventID string, body []byte, key string) error {
	resp, err := webhook.Deliver(ctx, nil, b.url, &webhook.Params{
		Provider: "standardwebhooks", Secret: key, EventID: eventID, Time: time.Now(), Body: body,
	})
	if err != nil {
		return err
	}
	var counts struct{ New, Duplicates int }
	_ = json.Unmarshal(resp.Body, &counts)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent++
	b.statuses[resp.StatusCode]++
	b.new += counts.New
	b.dupes += counts.Duplicates
	return nil
}
