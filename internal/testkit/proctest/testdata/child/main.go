// Command child is the process proctest's tests run: it prints its
// arguments one per line, then exits with status 3 when the first is "fail",
// or else waits for SIGTERM and exits 0.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	for _, arg := range os.Args[1:] {
		fmt.Println(arg)
	}
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		os.Exit(3)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("ready")
	<-sig
	fmt.Println("stopping")
}
