package inbox_test

import (
	"errors"
	"fmt"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// A handler wraps an error in Permanent when running the event again cannot
// help (a payload that names an account that does not exist): the worker
// then fails the event at once, with the error as its reason, instead of
// retrying it with backoff. The failed row can be replayed once the cause is
// fixed.
func ExamplePermanent() {
	err := inbox.Permanent(errors.New("unknown account acct_9"))
	fmt.Println(err)
	fmt.Println(inbox.IsPermanent(fmt.Errorf("book deposit: %w", err))) // wrapping keeps it
	fmt.Println(inbox.IsPermanent(errors.New("connection reset")))      // retried
	fmt.Println(inbox.Permanent(nil))

	// Output:
	// permanent: unknown account acct_9
	// true
	// false
	// <nil>
}
