// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 for
// scripts/kube-test.sh (no prebuilt etcd binary is downloaded).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
