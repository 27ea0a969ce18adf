// Command dump writes a cluster's DRA objects as a `kubectl get -o json`-style List:
//
//	go run ./cmd/dump --kubeconfig KUBECONFIG --out cluster.json
//	cargo run --release -p sharing-affinity-host -- audit cluster.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"sharing-affinity/e2e/dump"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	out := flag.String("out", "cluster.json", "file to write")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err == nil {
		var c kubernetes.Interface
		if c, err = kubernetes.NewForConfig(cfg); err == nil {
			err = dump.Write(context.Background(), c, *out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dump:", err)
		os.Exit(1)
	}
}
