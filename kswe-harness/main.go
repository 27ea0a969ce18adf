// Command kswe-harness runs the sharing-affinity KSWE guest inside the unmodified
// kube-scheduler-wasm-extension plugin (Go, wazero) with the sharing-affinity.dra/v1 host module
// of docs/kswe-dra-extension.md, and prints the same JSON report as
// `sharing-affinity replay --output json`:
//
//	kswe-harness replay [--guest FILE.wasm] [--async] [--timing=false] SCENARIO_DIR|CLUSTER.json
//
// The guest defaults to $KSWE_GUEST; the harness never builds it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kswe-harness:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "replay" {
		return fmt.Errorf("usage: kswe-harness replay [--guest FILE.wasm] [--async] [--timing=false] SCENARIO_DIR|CLUSTER.json")
	}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	guest := fs.String("guest", os.Getenv("KSWE_GUEST"), "the KSWE guest core module (default $KSWE_GUEST)")
	async := fs.Bool("async", false, "start the next pod's scheduling cycle before the previous pod's binding cycle")
	withTiming := fs.Bool("timing", true, "include the timing object")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("replay takes one scenario directory or cluster file, got %d arguments", fs.NArg())
	}
	if *guest == "" {
		return fmt.Errorf("no guest: pass --guest FILE.wasm or set KSWE_GUEST")
	}
	c, err := loadCluster(fs.Arg(0))
	if err != nil {
		return err
	}
	rep, err := runReplay(context.Background(), c, options{guest: *guest, async: *async})
	if err != nil {
		return err
	}
	for _, line := range rep.logs {
		fmt.Fprintln(os.Stderr, "plugin log:", line)
	}
	for _, rejected := range rep.Rejected {
		fmt.Fprintln(os.Stderr, "warning: rejected", rejected)
	}
	if !*withTiming {
		rep.Timing = nil
	}
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	fmt.Println(string(out))
	return nil
}
