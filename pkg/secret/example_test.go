package secret_test

import (
	"fmt"

	"github.com/hookinbox/hookinbox/pkg/secret"
)

func ExampleURL() {
	fmt.Println(secret.URL("postgres://app:s3cret@db:5432/hookinbox"))
	fmt.Println(secret.URL("host=db user=app password=s3cret"))
	// Output:
	// postgres://app:xxxxx@db:5432/hookinbox
	// host=db user=app password=xxxxx
}

func ExampleString() {
	signing := secret.String("whsec_s3cret")
	fmt.Printf("%v %q %#v\n", signing, signing, signing)
	fmt.Println(len(signing.Reveal()))
	// Output:
	// redacted "redacted" "redacted"
	// 12
}
