// Pinned build of etcd v3.6 (go.etcd.io/etcd/server/v3/etcdmain) for sharing-affinity e2e tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
